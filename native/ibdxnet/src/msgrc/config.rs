//! Engine configuration: one struct, the paper's Table 2 values as defaults,
//! validated before any thread starts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::con::node::resolve_address;
use crate::con::{AuthKey, NodeId};
use crate::fabric::{FabricConfig, FabricKind};
use crate::sys::parking::ParkingConfig;

/// Default UDP port of the connection manager.
pub const DEFAULT_UDP_PORT: u16 = 5730;

/// Everything an engine instance needs.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// This node's id.
    pub node_id: NodeId,
    /// Local UDP address of the connection manager.
    pub listen: SocketAddr,
    /// Which fabric; `IBDXNET_FABRIC` overrides it.
    pub fabric: FabricKind,
    /// Device, port and GID selection (and sim options).
    pub device: FabricConfig,
    /// Most connections open at once; the least recently used is evicted beyond it.
    pub max_connections: u32,
    /// Bytes of each connection's send ring (power of two).
    pub send_ring_size: u32,
    /// Send queue depth per connection (Table 2: 20).
    pub sq_size: u32,
    /// Shared receive queue depth (Table 2: 2000).
    pub srq_size: u32,
    /// Bytes of one receive buffer (Table 2: 32 KiB for small messages).
    pub recv_buffer_size: u32,
    /// Receive buffers (SGEs) per receive request (Table 2: 4).
    pub recv_sges_per_wr: u32,
    /// Receive buffers in the pool.
    pub recv_buffer_count: u32,
    /// Entries of the incoming ring buffer (power of two).
    pub incoming_ring_size: u32,
    /// Signal every k-th send request (and the last of each batch).
    pub signal_interval: u32,
    /// Send requests up to this many bytes inline (capped by the device).
    pub max_inline: u32,
    /// Completions polled per call.
    pub poll_batch: u32,
    /// How long a caller waits for a connection to come up.
    pub connect_timeout: Duration,
    /// Interval of exchange retransmissions while a connection is pending.
    pub exchange_retry: Duration,
    /// Interval of discovery rounds for not yet discovered nodes.
    pub discovery_interval: Duration,
    /// Thread parking of the send and receive threads.
    pub parking: ParkingConfig,
    /// File holding the pre-shared key of the control plane (`None` or
    /// empty: the key comes from `IBDXNET_AUTH_KEY`, or there is none).
    pub auth_key_file: Option<PathBuf>,
    /// The key itself; [`crate::msgrc::Engine::start`] reads it from
    /// `auth_key_file` or the environment when `None`. Not in the text form.
    pub auth_key: Option<AuthKey>,
    /// The node table at start (`node.<id> = host:port` in the text form):
    /// in the table before the connection manager reads its first packet,
    /// so packets of peers that already know this node are not dropped as
    /// foreign while it starts. Not in [`EngineConfig::to_text`] (no default).
    pub nodes: Vec<(NodeId, SocketAddr)>,
}

impl EngineConfig {
    /// Defaults (Table 2) for node `node_id` listening on `listen`.
    pub fn new(node_id: NodeId, listen: SocketAddr) -> Self {
        EngineConfig {
            node_id,
            listen,
            fabric: FabricKind::Auto,
            device: FabricConfig::default(),
            max_connections: 100,
            send_ring_size: 4 << 20,
            sq_size: 20,
            srq_size: 2000,
            recv_buffer_size: 32 << 10,
            recv_sges_per_wr: 4,
            recv_buffer_count: 16 << 10,
            incoming_ring_size: 8192,
            signal_interval: 4,
            max_inline: 128,
            poll_batch: 32,
            connect_timeout: Duration::from_secs(10),
            exchange_retry: Duration::from_millis(100),
            discovery_interval: Duration::from_secs(1),
            parking: ParkingConfig::default(),
            auth_key_file: None,
            auth_key: None,
            nodes: Vec::new(),
        }
    }

    /// Largest payload of one send request: what one receive request holds.
    pub fn max_wr_bytes(&self) -> u32 {
        self.recv_buffer_size.saturating_mul(self.recv_sges_per_wr)
    }

    /// Checks every field; the error names the field (by its key in the
    /// text form, see [`EngineConfig::set`]) and the rule.
    pub fn validate(&self) -> Result<(), String> {
        let pow2 = |name: &str, v: u32, min: u32| {
            if v < min || !v.is_power_of_two() {
                Err(format!("{name} = {v} must be a power of two and at least {min}"))
            } else {
                Ok(())
            }
        };
        let range = |name: &str, v: u64, min: u64, max: u64| {
            if v < min || v > max {
                Err(format!("{name} = {v} must be in [{min}, {max}]"))
            } else {
                Ok(())
            }
        };
        let millis = |name: &str, d: Duration, min: Duration, max: Duration| {
            if d < min || d > max {
                Err(format!("{name} = {} must be in [{}, {}] ms", d.as_millis(), min.as_millis(), max.as_millis()))
            } else {
                Ok(())
            }
        };
        if !self.node_id.is_valid() {
            return Err("node_id = 65535 (0xFFFF) is reserved as invalid; use 0..65534".into());
        }
        range("max_connections", self.max_connections.into(), 1, 0xFFFE)?;
        pow2("send_ring_size", self.send_ring_size, 4096)?;
        range("send_ring_size", self.send_ring_size.into(), 4096, 1 << 30)?;
        range("sq_size", self.sq_size.into(), 1, 1 << 16)?;
        range("srq_size", self.srq_size.into(), 1, 1 << 20)?;
        range("recv_buffer_size", self.recv_buffer_size.into(), 64, 1 << 30)?;
        range("recv_sges_per_wr", self.recv_sges_per_wr.into(), 1, 32)?;
        // One receive request (the largest send request) must fit a WR's u32 length.
        range("recv_buffer_size", u64::from(self.recv_buffer_size) * u64::from(self.recv_sges_per_wr), 64, 1 << 31)
            .map_err(|e| format!("{e} (as recv_buffer_size × recv_sges_per_wr, the bytes of one receive request)"))?;
        let in_srq = u64::from(self.srq_size) * u64::from(self.recv_sges_per_wr);
        range("recv_buffer_count", self.recv_buffer_count.into(), in_srq + 1, 1 << 24)
            .map_err(|e| format!("{e} (the SRQ alone holds srq_size × recv_sges_per_wr buffers)"))?;
        let pool_bytes = u64::from(self.recv_buffer_count) * u64::from(self.recv_buffer_size);
        range("recv_buffer_count", pool_bytes, 0, 1 << 36).map_err(|e| {
            format!("{e} (as recv_buffer_count × recv_buffer_size, the bytes of the receive pool, at most 64 GiB)")
        })?;
        pow2("incoming_ring_size", self.incoming_ring_size, 2)?;
        range("incoming_ring_size", self.incoming_ring_size.into(), 2, 1 << 24)?;
        range("signal_interval", self.signal_interval.into(), 1, self.sq_size.into())
            .map_err(|e| format!("{e} (at most sq_size)"))?;
        range("max_inline", self.max_inline.into(), 0, MAX_INLINE_LIMIT.into())?;
        range("poll_batch", self.poll_batch.into(), 1, 4096)?;
        let ms = Duration::from_millis;
        millis("connect_timeout_ms", self.connect_timeout, ms(1), MAX_TIMEOUT)?;
        millis("exchange_retry_ms", self.exchange_retry, ms(1), MAX_INTERVAL)?;
        millis("discovery_interval_ms", self.discovery_interval, ms(1), MAX_INTERVAL)?;
        millis("parking_yield_after_ms", self.parking.yield_after, Duration::ZERO, MAX_TIMEOUT)?;
        millis("parking_park_after_ms", self.parking.park_after, Duration::ZERO, MAX_TIMEOUT)?;
        self.parking.validate()
    }
}

/// Largest accepted `max_inline` (devices cap it far lower; this only
/// rejects nonsense before the device is asked).
pub const MAX_INLINE_LIMIT: u32 = 4096;
/// Largest connect timeout and parking threshold (one day): bounded so that
/// deadlines computed from them cannot overflow.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);
/// Largest exchange retry and discovery interval (one hour).
pub const MAX_INTERVAL: Duration = Duration::from_secs(3_600);

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> EngineConfig {
        EngineConfig::new(NodeId(1), "127.0.0.1:5730".parse().unwrap())
    }

    #[test]
    fn defaults_are_valid_and_follow_table_2() {
        let c = cfg();
        c.validate().unwrap();
        assert_eq!(
            (c.sq_size, c.srq_size, c.recv_buffer_size, c.recv_sges_per_wr, c.max_connections),
            (20, 2000, 32768, 4, 100)
        );
    }

    #[test]
    fn each_bad_field_is_named() {
        type Change = Box<dyn Fn(&mut EngineConfig)>;
        let cases: Vec<(&str, Change)> = vec![
            ("node_id", Box::new(|c| c.node_id = NodeId::INVALID)),
            ("send_ring_size", Box::new(|c| c.send_ring_size = 5000)),
            ("sq_size", Box::new(|c| c.sq_size = 0)),
            ("recv_buffer_count", Box::new(|c| c.recv_buffer_count = 100)),
            ("incoming_ring_size", Box::new(|c| c.incoming_ring_size = 3)),
            ("signal_interval", Box::new(|c| c.signal_interval = 21)),
            ("recv_sges_per_wr", Box::new(|c| c.recv_sges_per_wr = 33)),
            ("max_connections", Box::new(|c| c.max_connections = 0)),
        ];
        for (field, change) in cases {
            let mut c = cfg();
            change(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.contains(field), "{field}: {e}");
        }
    }

    #[test]
    fn start_nodes_are_parsed_and_bad_ones_named() {
        let mut c = cfg();
        c.apply_text("node.3=127.0.0.1:7000\nnode.4=127.0.0.1:7001\nnode.3=127.0.0.1:7002\n").unwrap();
        let want: Vec<(NodeId, std::net::SocketAddr)> =
            vec![(NodeId(4), "127.0.0.1:7001".parse().unwrap()), (NodeId(3), "127.0.0.1:7002".parse().unwrap())];
        assert_eq!(c.nodes, want, "the last entry of an id wins");
        let e = cfg().apply_text("node.65535=127.0.0.1:7000").unwrap_err();
        assert!(e.contains("node.65535") && e.contains("is not a node id"), "{e}");
        let e = cfg().apply_text("\nnode.2=nowhere").unwrap_err();
        assert!(e.starts_with("line 2: node.2: ") && e.contains("host:port"), "{e}");
    }
}

/// Text form of the configuration: `key=value` lines (for Java, files and
/// command lines). Durations are in milliseconds; keys are the field names.
impl EngineConfig {
    /// Sets one field from its text form; the error names the key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let key = key.trim();
        let v = value.trim();
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{key} = '{v}': not a non-negative integer ({e})"));
        let u32v = |v: &str| {
            num(v).and_then(|n| u32::try_from(n).map_err(|_| format!("{key} = {n}: too large (at most {})", u32::MAX)))
        };
        let ms = |v: &str| num(v).map(Duration::from_millis);
        match key {
            "node_id" => {
                let n = num(v)?;
                self.node_id = u16::try_from(n)
                    .ok()
                    .and_then(NodeId::new)
                    .ok_or(format!("node_id = {n}: must be in [0, 65534] (65535 is reserved as invalid)"))?;
            }
            "listen" => self.listen = resolve_address(v).map_err(|e| format!("listen: {e}"))?,
            "fabric" => self.fabric = FabricKind::parse(v).map_err(|e| format!("fabric: {e}"))?,
            "device" => self.device.device = (!v.is_empty()).then(|| v.to_string()),
            "port" => {
                self.device.port =
                    u8::try_from(num(v)?).map_err(|_| format!("port = {v}: must be in [0, 255] (0 = port 1)"))?
            }
            "gid_index" => {
                self.device.gid_index = if v.is_empty() {
                    None
                } else {
                    Some(u8::try_from(num(v)?).map_err(|_| format!("gid_index = {v}: must be in [0, 255]"))?)
                }
            }
            "max_connections" => self.max_connections = u32v(v)?,
            "send_ring_size" => self.send_ring_size = u32v(v)?,
            "sq_size" => self.sq_size = u32v(v)?,
            "srq_size" => self.srq_size = u32v(v)?,
            "recv_buffer_size" => self.recv_buffer_size = u32v(v)?,
            "recv_sges_per_wr" => self.recv_sges_per_wr = u32v(v)?,
            "recv_buffer_count" => self.recv_buffer_count = u32v(v)?,
            "incoming_ring_size" => self.incoming_ring_size = u32v(v)?,
            "signal_interval" => self.signal_interval = u32v(v)?,
            "max_inline" => self.max_inline = u32v(v)?,
            "poll_batch" => self.poll_batch = u32v(v)?,
            "connect_timeout_ms" => self.connect_timeout = ms(v)?,
            "exchange_retry_ms" => self.exchange_retry = ms(v)?,
            "discovery_interval_ms" => self.discovery_interval = ms(v)?,
            "parking_yield_after_ms" => self.parking.yield_after = ms(v)?,
            "parking_park_after_ms" => self.parking.park_after = ms(v)?,
            "parking_park_for_ns" => self.parking.park_for = Duration::from_nanos(num(v)?),
            "auth_key_file" => self.auth_key_file = (!v.is_empty()).then(|| PathBuf::from(v)),
            k if k.starts_with("node.") => {
                let id = k[5..]
                    .parse::<u16>()
                    .ok()
                    .and_then(NodeId::new)
                    .ok_or(format!("{key}: '{}' is not a node id in [0, 65534]", &k[5..]))?;
                let addr = resolve_address(v).map_err(|e| format!("{key}: {e}"))?;
                self.nodes.retain(|n| n.0 != id);
                self.nodes.push((id, addr));
            }
            other => return Err(format!("unknown configuration key '{other}'")),
        }
        Ok(())
    }

    /// Applies `key=value` lines (blank lines and `#` comments ignored),
    /// then validates.
    pub fn apply_text(&mut self, text: &str) -> Result<(), String> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = line.split_once('=').ok_or_else(|| format!("line {}: '{line}' is not key=value", i + 1))?;
            self.set(k, v).map_err(|e| format!("line {}: {e}", i + 1))?;
        }
        self.validate()
    }

    /// Every field as `key=value` lines (the defaults, for a fresh config).
    pub fn to_text(&self) -> String {
        let d = &self.device;
        format!(
            "node_id={}\nlisten={}\nfabric={}\ndevice={}\nport={}\ngid_index={}\nmax_connections={}\nsend_ring_size={}\n\
             sq_size={}\nsrq_size={}\nrecv_buffer_size={}\nrecv_sges_per_wr={}\nrecv_buffer_count={}\n\
             incoming_ring_size={}\nsignal_interval={}\nmax_inline={}\npoll_batch={}\nconnect_timeout_ms={}\n\
             exchange_retry_ms={}\ndiscovery_interval_ms={}\nparking_yield_after_ms={}\nparking_park_after_ms={}\n\
             parking_park_for_ns={}\nauth_key_file={}\n",
            self.node_id.0,
            self.listen,
            self.fabric.name(),
            d.device.as_deref().unwrap_or(""),
            d.port_or_default(),
            d.gid_index.map(|g| g.to_string()).unwrap_or_default(),
            self.max_connections,
            self.send_ring_size,
            self.sq_size,
            self.srq_size,
            self.recv_buffer_size,
            self.recv_sges_per_wr,
            self.recv_buffer_count,
            self.incoming_ring_size,
            self.signal_interval,
            self.max_inline,
            self.poll_batch,
            self.connect_timeout.as_millis(),
            self.exchange_retry.as_millis(),
            self.discovery_interval.as_millis(),
            self.parking.yield_after.as_millis(),
            self.parking.park_after.as_millis(),
            self.parking.park_for.as_nanos(),
            self.auth_key_file.as_deref().map(|p| p.display().to_string()).unwrap_or_default(),
        )
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;

    #[test]
    fn text_round_trips_and_errors_name_the_line_and_key() {
        let mut c = EngineConfig::new(NodeId(4), "127.0.0.1:5730".parse().unwrap());
        c.sq_size = 33;
        c.device.gid_index = Some(1);
        let mut d = EngineConfig::new(NodeId(0), "0.0.0.0:1".parse().unwrap());
        d.apply_text(&c.to_text()).unwrap();
        assert_eq!(d.to_text(), c.to_text());
        let e = d.apply_text("# comment\n\nsq_size=abc\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("sq_size"), "{e}");
        assert!(d.apply_text("bogus=1").unwrap_err().contains("unknown configuration key 'bogus'"));
        assert!(d.apply_text("node_id=65535").unwrap_err().contains("node_id"));
        assert!(d.apply_text("sq_size=0").unwrap_err().contains("sq_size"), "validated after applying");
    }
}
