//! Engine configuration: one struct, validated before any thread starts.
//! Its keys (type, default, range, meaning) are defined once, in [`KEYS`];
//! the rules that relate several keys are [`EngineConfig::validate`]'s code.

mod error;
mod host;
mod keys;
mod pins;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::con::node::resolve_address;
use crate::con::{AuthKey, NodeId};
use crate::fabric::{FabricConfig, FabricKind};
use crate::sys::parking::ParkingConfig;

pub use error::{ConfigError, Conflict, DeviceLimitError, ValueError};
pub use keys::{key, markdown_table, nearest, Key, Range, KEYS, MAX_INLINE_LIMIT, MAX_INTERVAL_MS, MAX_TIMEOUT_MS};
pub use pins::{PinsError, ThreadPins};

/// How many threads run a node's send and receive work (`engine_threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineThreads {
    /// A send thread and a receive thread.
    #[default]
    Dedicated,
    /// One thread doing the send work, then the receive work, each iteration.
    Shared,
}

impl EngineThreads {
    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            EngineThreads::Dedicated => "dedicated",
            EngineThreads::Shared => "shared",
        }
    }
}

/// Default UDP port of the connection manager.
pub const DEFAULT_UDP_PORT: u16 = 5730;

/// Everything an engine instance needs. The fields set by a key are
/// described in [`KEYS`] (key names in parentheses).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// (`node_id`)
    pub node_id: NodeId,
    /// (`listen`)
    pub listen: SocketAddr,
    /// (`fabric`)
    pub fabric: FabricKind,
    /// (`device`, `port`, `gid_index`) and the sim options.
    pub device: FabricConfig,
    /// (`max_connections`)
    pub max_connections: u32,
    /// (`evict_at_limit`)
    pub evict_at_limit: bool,
    /// (`send_ring_size`)
    pub send_ring_size: u32,
    /// (`sq_size`)
    pub sq_size: u32,
    /// (`srq_size`)
    pub srq_size: u32,
    /// (`recv_buffer_size`)
    pub recv_buffer_size: u32,
    /// (`recv_sges_per_wr`)
    pub recv_sges_per_wr: u32,
    /// (`recv_buffer_count`)
    pub recv_buffer_count: u32,
    /// (`recv_slab_buffers`)
    pub recv_slab_buffers: u32,
    /// (`incoming_ring_size`)
    pub incoming_ring_size: u32,
    /// (`signal_interval`)
    pub signal_interval: u32,
    /// (`max_inline`)
    pub max_inline: u32,
    /// (`poll_batch`)
    pub poll_batch: u32,
    /// (`flow_control_unit`)
    pub flow_control_unit: u64,
    /// (`connect_timeout_ms`)
    pub connect_timeout: Duration,
    /// (`exchange_retry_ms`)
    pub exchange_retry: Duration,
    /// (`discovery_interval_ms`)
    pub discovery_interval: Duration,
    /// (`parking_yield_after_ms`, `parking_park_after_ms`, `parking_park_for_ns`)
    pub parking: ParkingConfig,
    /// (`pin_threads`)
    pub pin_threads: ThreadPins,
    /// (`engine_threads`)
    pub engine_threads: EngineThreads,
    /// (`send_from_caller`)
    pub send_from_caller: bool,
    /// (`send_from_caller_max_bytes`)
    pub send_from_caller_max_bytes: u32,
    /// (`recv_from_caller`)
    pub recv_from_caller: bool,
    /// (`stats_timers`)
    pub stats_timers: bool,
    /// (`stats_print_interval_ms`; zero: no print thread)
    pub stats_print_interval: Duration,
    /// (`auth_key_file`)
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

/// How errors name a key: as in the engine's text form (`sq_size`), or with
/// the prefix the Java configuration gives engine keys (`native.sq_size`).
#[derive(Debug, Clone, Copy)]
struct Names<'a> {
    prefix: &'a str,
}

impl Names<'_> {
    fn of(self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

const PLAIN: Names<'static> = Names { prefix: "" };

impl EngineConfig {
    /// The defaults of [`KEYS`] for node `node_id` listening on `listen`.
    pub fn new(node_id: NodeId, listen: SocketAddr) -> Self {
        // Placeholders only: every key's default is applied below.
        let mut c = EngineConfig {
            node_id,
            listen,
            fabric: FabricKind::Auto,
            device: FabricConfig::default(),
            max_connections: 0,
            send_ring_size: 0,
            sq_size: 0,
            srq_size: 0,
            recv_buffer_size: 0,
            recv_sges_per_wr: 0,
            recv_buffer_count: 0,
            recv_slab_buffers: 0,
            incoming_ring_size: 0,
            signal_interval: 0,
            max_inline: 0,
            poll_batch: 0,
            flow_control_unit: 0,
            connect_timeout: Duration::ZERO,
            exchange_retry: Duration::ZERO,
            discovery_interval: Duration::ZERO,
            parking: ParkingConfig::default(),
            pin_threads: ThreadPins::default(),
            engine_threads: EngineThreads::Dedicated,
            send_from_caller: true,
            send_from_caller_max_bytes: 0,
            recv_from_caller: true,
            stats_timers: false,
            evict_at_limit: true,
            stats_print_interval: Duration::ZERO,
            auth_key_file: None,
            auth_key: None,
            nodes: Vec::new(),
        };
        for k in KEYS.iter().filter(|k| k.name != "node_id" && k.name != "listen") {
            // The defaults are constants, checked by `every_default_parses_and_is_valid`.
            (k.set)(&mut c, k.default).unwrap_or_else(|e| panic!("default of {}: {e}", k.name));
        }
        c
    }

    /// Largest payload of one send request: what one receive request holds.
    pub fn max_wr_bytes(&self) -> u32 {
        self.recv_buffer_size.saturating_mul(self.recv_sges_per_wr)
    }

    /// Checks every key's range, then the rules relating keys; the error
    /// names the key (as in the text form) and its value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_named(PLAIN)
    }

    fn validate_named(&self, n: Names) -> Result<(), ConfigError> {
        for k in KEYS {
            if let Some(value) = (k.number)(self) {
                if !k.range.contains(value) {
                    return Err(ConfigError::OutOfRange { key: n.of(k.name), value, range: k.range });
                }
            }
        }
        let conflict = |conflict| Err(ConfigError::Conflict { prefix: n.prefix.to_string(), conflict });
        let (size, sges, count) = (self.recv_buffer_size, self.recv_sges_per_wr, self.recv_buffer_count);
        if u64::from(size) * u64::from(sges) > 1 << 31 {
            return conflict(Conflict::ReceiveRequest { recv_buffer_size: size, recv_sges_per_wr: sges });
        }
        if u64::from(count) <= u64::from(self.srq_size) * u64::from(sges) {
            return conflict(Conflict::PoolBelowSrq {
                recv_buffer_count: count,
                srq_size: self.srq_size,
                recv_sges_per_wr: sges,
            });
        }
        if u64::from(count) * u64::from(size) > 1 << 36 {
            return conflict(Conflict::PoolTooLarge { recv_buffer_count: count, recv_buffer_size: size });
        }
        if self.signal_interval > self.sq_size {
            return conflict(Conflict::SignalInterval { signal_interval: self.signal_interval, sq_size: self.sq_size });
        }
        if self.parking.park_after < self.parking.yield_after {
            return conflict(Conflict::Parking {
                park_after_ms: self.parking.park_after.as_millis(),
                yield_after_ms: self.parking.yield_after.as_millis(),
            });
        }
        Ok(())
    }
}

/// Text form of the configuration: `key=value` lines (for Java, files and
/// command lines), with the keys of [`KEYS`] and `node.<id>=host:port`.
impl EngineConfig {
    /// Sets one key from its text form; the error names the key and value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        self.set_named(key, value, PLAIN)
    }

    fn set_named(&mut self, key: &str, value: &str, n: Names) -> Result<(), ConfigError> {
        let (key, v) = (key.trim(), value.trim());
        let bad = |reason| ConfigError::BadValue { key: n.of(key), value: v.to_string(), reason };
        if let Some(k) = keys::key(key) {
            return (k.set)(self, v).map_err(bad);
        }
        if let Some(id) = key.strip_prefix("node.") {
            let id = id
                .parse::<u16>()
                .ok()
                .and_then(NodeId::new)
                .ok_or_else(|| ConfigError::BadNodeId { key: n.of(key), id: id.to_string() })?;
            let addr = resolve_address(v).map_err(|e| bad(e.into()))?;
            self.nodes.retain(|n| n.0 != id);
            self.nodes.push((id, addr));
            return Ok(());
        }
        Err(ConfigError::UnknownKey { key: n.of(key), suggestion: keys::nearest(key).map(|k| n.of(k)) })
    }

    /// Applies the `key=value` lines of a file (blank lines and `#`
    /// comments ignored), then validates; an error from a line names it.
    pub fn apply_text(&mut self, text: &str) -> Result<(), ConfigError> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let on_line = |e| ConfigError::Line { line: i + 1, source: Box::new(e) };
            let (k, v) = line.split_once('=').ok_or_else(|| on_line(ConfigError::NotKeyValue(line.to_string())))?;
            self.set(k, v).map_err(on_line)?;
        }
        self.validate()
    }

    /// Applies `key=value` lines built by a program from its own settings
    /// (the Java configuration), then validates. Errors name the key as that
    /// program does, `prefix` + key (`native.sq_size`), and no line: the
    /// lines are not the user's.
    pub fn apply_keys(&mut self, text: &str, prefix: &str) -> Result<(), ConfigError> {
        let n = Names { prefix };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (k, v) = line.split_once('=').ok_or_else(|| ConfigError::NotKeyValue(format!("{prefix}{line}")))?;
            self.set_named(k, v, n)?;
        }
        self.validate_named(n)
    }

    /// Every key as `key=value` lines, in the order of [`KEYS`].
    pub fn to_text(&self) -> String {
        KEYS.iter().map(|k| format!("{}={}\n", k.name, (k.get)(self))).collect()
    }
}
