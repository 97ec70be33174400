//! Upstream's `MsgrcJNIBinding.init` parameters (from its `IBConfig`) → our
//! [`EngineConfig`] (FACTS.md §3), and the overrides upstream has no field
//! for (listen address, extra engine keys). Every refusal is one sentence
//! naming upstream's parameter, its value and our rule; `init` logs it and
//! returns false, as the C++ library did on a bad configuration.

use std::net::{IpAddr, SocketAddr};

use crate::con::NodeId;
use crate::msgrc::config::{ConfigError, DEFAULT_UDP_PORT};
use crate::msgrc::EngineConfig;

/// Environment variable: this node's UDP address, `ip` (port 5730, upstream's
/// fixed one) or `ip:port`. Lets two upstream JVMs share a host (127.0.0.1
/// and 127.0.0.2). The system property [`LISTEN_PROPERTY`] wins over it.
pub const LISTEN_ENV: &str = "IBDXNET_COMPAT_LISTEN";
/// System property with the meaning of [`LISTEN_ENV`].
pub const LISTEN_PROPERTY: &str = "ibdxnet.compat.listen";
/// Environment variable: more engine keys, `key=value` separated by `;`
/// (e.g. `device=rxe0;gid_index=1`), applied after the mapped parameters.
pub const KEYS_ENV: &str = "IBDXNET_COMPAT_KEYS";
/// System property with the meaning of [`KEYS_ENV`] (it wins over it).
pub const KEYS_PROPERTY: &str = "ibdxnet.compat.keys";
/// Environment variable: `0` turns the ring watch off (`sys::write_watch`):
/// the send thread then polls for upstream's data with short parks.
pub const RING_WATCH_ENV: &str = "IBDXNET_COMPAT_RING_WATCH";
/// The engine key of the statistics print interval.
pub const STATS_INTERVAL_KEY: &str = "stats_print_interval_ms";

/// Idle time before a polling send thread parks, ms (then it sleeps the
/// engine's `parking_park_for_ns` per idle iteration, plus the kernel's timer
/// slack: about 55 µs).
pub const COMPAT_PARK_AFTER_MS: u64 = 1;

/// `MsgrcJNIBinding.init`'s parameters after the callback handler, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitParams {
    /// `m_pinSendRecvThreads`.
    pub pin_send_recv_threads: bool,
    /// `m_enableSignalHandler` (ignored: a native crash handler inside a JVM is harmful).
    pub enable_signal_handler: bool,
    /// `m_statisticsThreadPrintIntervalMs` (0 = off).
    pub statistics_print_interval_ms: i32,
    /// `m_ownNodeId`.
    pub own_node_id: i16,
    /// `m_connectionCreationTimeout`.
    pub connection_creation_timeout_ms: i32,
    /// `m_maxConnections`.
    pub max_num_connections: i32,
    /// `m_sqSize`.
    pub sq_size: i32,
    /// `m_srqSize`.
    pub srq_size: i32,
    /// `m_sharedSCQSize` (ours is derived: `max_connections × sq_size + 64`).
    pub shared_scq_size: i32,
    /// `m_sharedRCQSize` (ours is derived: `srq_size + 64`).
    pub shared_rcq_size: i32,
    /// `m_outgoingRingBufferSize`.
    pub send_buffer_size: i32,
    /// `m_incomingBufferPoolTotalSize`, bytes.
    pub recv_buffer_pool_size: i64,
    /// `m_incomingBufferSize`.
    pub recv_buffer_size: i32,
    /// `m_maxSGEs`.
    pub max_sges: i32,
}

impl InitParams {
    /// Upstream's `IBConfig` defaults, except the 2 GB receive pool (256 MB
    /// here, as a VM can register it).
    pub fn upstream_defaults(own_node_id: i16) -> Self {
        InitParams {
            pin_send_recv_threads: false,
            enable_signal_handler: false,
            statistics_print_interval_ms: 0,
            own_node_id,
            connection_creation_timeout_ms: 5000,
            max_num_connections: 100,
            sq_size: 20,
            srq_size: 2000,
            shared_scq_size: 2000,
            shared_rcq_size: 2000,
            send_buffer_size: 4 << 20,
            recv_buffer_pool_size: 256 << 20,
            recv_buffer_size: 32 << 10,
            max_sges: 4,
        }
    }
}

/// What upstream's parameters and the overrides make of our configuration.
#[derive(Debug)]
pub struct Mapped {
    /// The validated engine configuration.
    pub config: EngineConfig,
    /// Things worth a log line (ignored or unsupported parameters).
    pub notes: Vec<String>,
}

/// Maps `p` (and the overrides: `listen`, from [`LISTEN_PROPERTY`] or
/// [`LISTEN_ENV`]; `extra_keys`, from [`KEYS_ENV`]) to a validated
/// configuration. `Err` is the reason init refuses, naming upstream's field.
pub fn map(p: &InitParams, listen: Option<&str>, extra_keys: Option<&str>) -> Result<Mapped, String> {
    let mut notes = Vec::new();
    let node = NodeId::new(p.own_node_id as u16)
        .ok_or_else(|| format!("ownNodeId {:#06x} is the invalid node id", p.own_node_id as u16))?;
    let listen = match listen.map(str::trim).filter(|s| !s.is_empty()) {
        None => SocketAddr::new(IpAddr::from([0, 0, 0, 0]), DEFAULT_UDP_PORT),
        Some(t) => parse_listen(t)?,
    };
    let mut c = EngineConfig::new(node, listen);
    // The power of two is our ring's rule (positions wrap by mask). Rounding up
    // would break the wrap: upstream Java wraps its positions at the size it
    // was configured with, so the sizes must be equal.
    let ring = p.send_buffer_size;
    if ring <= 0 || !(ring as u32).is_power_of_two() {
        return Err(format!(
            "m_outgoingRingBufferSize (sendBufferSize) = {ring} is not a power of two: this library's send ring \
             wraps by mask, and rounding would disagree with where upstream Java wraps; use e.g. 4mb"
        ));
    }
    let size = p.recv_buffer_size;
    if size <= 0 {
        return Err(format!("m_incomingBufferSize (recvBufferSize) = {size} must be positive"));
    }
    let count = p.recv_buffer_pool_size / i64::from(size);
    let pool_note = format!(
        "m_incomingBufferPoolTotalSize (recvBufferPoolSize) = {} / m_incomingBufferSize {size} = {count} buffers",
        p.recv_buffer_pool_size
    );
    let set = |c: &mut EngineConfig, key: &str, value: String, theirs: &str| {
        c.set(key, &value).map_err(|e| format!("{theirs} → {key}: {e}"))
    };
    set(&mut c, "connect_timeout_ms", p.connection_creation_timeout_ms.to_string(), "m_connectionCreationTimeout")?;
    set(&mut c, "max_connections", p.max_num_connections.to_string(), "m_maxConnections")?;
    set(&mut c, "sq_size", p.sq_size.to_string(), "m_sqSize")?;
    set(&mut c, "srq_size", p.srq_size.to_string(), "m_srqSize")?;
    set(&mut c, "send_ring_size", ring.to_string(), "m_outgoingRingBufferSize")?;
    set(&mut c, "recv_buffer_size", size.to_string(), "m_incomingBufferSize")?;
    set(&mut c, "recv_buffer_count", count.to_string(), &pool_note)?;
    set(&mut c, "recv_sges_per_wr", p.max_sges.to_string(), "m_maxSGEs")?;
    // Where the ring watch cannot wake it, the send thread polls
    // (`CompatHandler::arm_send_wakeup`): it slows down to short parks after
    // this much idleness (upstream's C++: after 1 s, busy then yielding).
    set(&mut c, "parking_park_after_ms", COMPAT_PARK_AFTER_MS.to_string(), "(compat polling)")?;
    // Upstream's C++ always timed its operations and printed the timers at
    // shutdown; so does the statistics block at our shutdown.
    set(&mut c, "stats_timers", "true".into(), "(compat statistics)")?;
    // Upstream's C++ never closed a connection for its limit: Java dismisses
    // its own (and never tells the library). `IBDXNET_COMPAT_KEYS=evict_at_limit=true`
    // evicts again, reported as nodeDisconnected.
    set(&mut c, "evict_at_limit", "false".into(), "(compat: no native eviction)")?;
    if p.pin_send_recv_threads {
        // Upstream's C++ pins the send thread to CPU 0, the receive thread to CPU 1.
        set(&mut c, "pin_threads", "send=0,recv=1".into(), "m_pinSendRecvThreads")?;
    }
    if p.enable_signal_handler {
        notes.push("m_enableSignalHandler ignored: a native crash handler inside a JVM is harmful".into());
    }
    let interval = p.statistics_print_interval_ms;
    if interval > 0 {
        // Our print thread (target `ibdxnet::stats`) prints the statistics map
        // every interval, and once more at shutdown, as upstream's did.
        set(&mut c, STATS_INTERVAL_KEY, interval.to_string(), "m_statisticsThreadPrintIntervalMs")?;
    }
    if let Some(extra) = extra_keys {
        for kv in extra.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("{KEYS_ENV}: '{kv}' is not key=value"))?;
            c.set(k, v).map_err(|e| format!("{KEYS_ENV}: {e}"))?;
        }
    }
    c.validate().map_err(|e| explain(&e, p))?;
    // Ours are derived from the other sizes; upstream's only set a capacity.
    let (scq, rcq) = (c.max_connections * c.sq_size + 64, c.srq_size + 64);
    if i64::from(p.shared_scq_size) > i64::from(scq) || i64::from(p.shared_rcq_size) > i64::from(rcq) {
        notes.push(format!(
            "m_sharedSCQSize {} / m_sharedRCQSize {} ignored: this library sizes its completion queues from the other \
             sizes ({scq} = m_maxConnections × m_sqSize + 64, {rcq} = m_srqSize + 64)",
            p.shared_scq_size, p.shared_rcq_size
        ));
    }
    Ok(Mapped { config: c, notes })
}

/// `ip` (port 5730) or `ip:port`.
fn parse_listen(t: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    t.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, DEFAULT_UDP_PORT))
        .map_err(|_| format!("{LISTEN_ENV}/{LISTEN_PROPERTY} = '{t}' is neither ip nor ip:port"))
}

/// Our keys set from upstream's fields, for errors.
const UPSTREAM_NAMES: &[(&str, &str)] = &[
    ("connect_timeout_ms", "m_connectionCreationTimeout"),
    ("max_connections", "m_maxConnections"),
    ("sq_size", "m_sqSize"),
    ("srq_size", "m_srqSize"),
    ("send_ring_size", "m_outgoingRingBufferSize"),
    ("recv_buffer_size", "m_incomingBufferSize"),
    ("recv_buffer_count", "m_incomingBufferPoolTotalSize / m_incomingBufferSize"),
    ("recv_sges_per_wr", "m_maxSGEs"),
];

/// A validation error in upstream's words where the rule relates its fields.
fn explain(e: &ConfigError, p: &InitParams) -> String {
    match e {
        ConfigError::Conflict { conflict: crate::msgrc::config::Conflict::PoolBelowSrq { .. }, .. } => format!(
            "the receive pool (m_incomingBufferPoolTotalSize {} / m_incomingBufferSize {} buffers) must hold more \
             buffers than m_srqSize {} × m_maxSGEs {} (every receive request of the shared receive queue takes \
             m_maxSGEs buffers): raise the pool or lower m_srqSize ({e})",
            p.recv_buffer_pool_size, p.recv_buffer_size, p.srq_size, p.max_sges
        ),
        ConfigError::OutOfRange { key, .. } => match UPSTREAM_NAMES.iter().find(|(ours, _)| ours == key) {
            Some((_, theirs)) => format!("{theirs}: {e}"),
            None => format!("{e}"),
        },
        _ => format!("{e} (mapped from upstream's IBConfig, see README \"Drop-in for upstream DXNet\")"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_map_one_to_one() {
        let m = map(&InitParams::upstream_defaults(3), None, None).unwrap();
        let c = &m.config;
        assert_eq!(c.node_id, NodeId(3));
        assert_eq!(c.listen, "0.0.0.0:5730".parse().unwrap());
        assert_eq!(c.connect_timeout.as_millis(), 5000);
        assert_eq!((c.max_connections, c.sq_size, c.srq_size), (100, 20, 2000));
        assert_eq!(
            (c.send_ring_size, c.recv_buffer_size, c.recv_buffer_count, c.recv_sges_per_wr),
            (4 << 20, 32768, 8192, 4)
        );
        assert_eq!(c.pin_threads, Default::default());
        assert!(m.notes.is_empty(), "{:?}", m.notes);
    }

    #[test]
    fn pins_signal_handler_and_stats() {
        let mut p = InitParams::upstream_defaults(1);
        p.pin_send_recv_threads = true;
        p.enable_signal_handler = true;
        p.statistics_print_interval_ms = 1000;
        let m = map(&p, None, None).unwrap();
        assert_eq!((m.config.pin_threads.send, m.config.pin_threads.recv), (Some(0), Some(1)));
        assert!(m.notes.iter().any(|n| n.contains("m_enableSignalHandler")));
        assert_eq!(m.config.stats_print_interval.as_millis(), 1000);
        assert!(!m.notes.iter().any(|n| n.contains("not supported")), "{:?}", m.notes);
    }

    #[test]
    fn refuses_with_upstreams_names() {
        let mut p = InitParams::upstream_defaults(1);
        p.send_buffer_size = 3_000_000;
        assert!(map(&p, None, None).unwrap_err().contains("m_outgoingRingBufferSize"));
        let mut p = InitParams::upstream_defaults(1);
        p.recv_buffer_pool_size = 2000 * 4 * 32768; // exactly srq × SGEs buffers: one too few
        let e = map(&p, None, None).unwrap_err();
        assert!(e.contains("m_srqSize 2000 × m_maxSGEs 4"), "{e}");
        let mut p = InitParams::upstream_defaults(1);
        p.recv_buffer_size = 0;
        assert!(map(&p, None, None).unwrap_err().contains("m_incomingBufferSize"));
        assert!(map(&InitParams::upstream_defaults(-1), None, None).unwrap_err().contains("ownNodeId"));
        let mut p = InitParams::upstream_defaults(1);
        p.max_sges = 64;
        assert!(map(&p, None, None).unwrap_err().contains("m_maxSGEs"));
    }

    #[test]
    fn overrides() {
        let p = InitParams::upstream_defaults(1);
        assert_eq!(map(&p, Some("127.0.0.2"), None).unwrap().config.listen, "127.0.0.2:5730".parse().unwrap());
        assert_eq!(map(&p, Some("127.0.0.1:0"), None).unwrap().config.listen, "127.0.0.1:0".parse().unwrap());
        assert!(map(&p, Some("nonsense"), None).unwrap_err().contains(LISTEN_ENV));
        let m = map(&p, None, Some("fabric=sim; discovery_interval_ms=50")).unwrap();
        assert_eq!(m.config.discovery_interval.as_millis(), 50);
        assert!(map(&p, None, Some("nokey")).unwrap_err().contains(KEYS_ENV));
    }

    #[test]
    fn larger_shared_cqs_are_noted() {
        let mut p = InitParams::upstream_defaults(1);
        p.shared_rcq_size = 100_000;
        assert!(map(&p, None, None).unwrap().notes.iter().any(|n| n.contains("m_sharedRCQSize")));
    }
}
