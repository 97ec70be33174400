//! Why a configuration is refused ([`ConfigError`]): by its text, by the
//! rules relating keys, or, when the engine starts, by the host (listen
//! address, key file, device, port, device limits, CPUs). Every variant
//! names the key as the user wrote it (`sq_size`, or `native.sq_size` from
//! Java) and, where there is one, the value.

use std::net::SocketAddr;

use super::keys::Range;
use super::pins::PinsError;
use crate::con::node::AddressError;
use crate::con::{AuthKeyError, NodeError, NodeId};
use crate::fabric::{FabricError, FabricKindError};

/// Why a value does not parse as its key's type (the reason only; the key
/// and value are [`ConfigError::BadValue`]'s).
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// Not a number.
    #[error("not a non-negative integer ({0})")]
    NotUnsigned(std::num::ParseIntError),
    /// Neither `true` nor `false`.
    #[error("not `true` or `false`")]
    NotBool,
    /// A number beyond the key's type.
    #[error("too large (at most {0})")]
    TooLarge(u64),
    /// A number that is no node id.
    #[error("{0} is not a node id in [0, 65534]")]
    NotNodeId(u64),
    /// An address that does not resolve.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// No fabric's name.
    #[error(transparent)]
    Fabric(#[from] FabricKindError),
    /// No thread-to-CPU list.
    #[error(transparent)]
    Pins(#[from] PinsError),
    /// Neither `dedicated` nor `shared`.
    #[error("not `dedicated` or `shared`")]
    NotEngineThreads,
}

/// Values of several keys that do not fit together (the first key named is
/// the one blamed). Its text needs the prefix of the key names:
/// [`ConfigError::Conflict`] adds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// One receive request (`recv_buffer_size` × `recv_sges_per_wr`) is over 2^31 bytes.
    ReceiveRequest {
        /// `recv_buffer_size`.
        recv_buffer_size: u32,
        /// `recv_sges_per_wr`.
        recv_sges_per_wr: u32,
    },
    /// The pool holds no more buffers than the SRQ alone.
    PoolBelowSrq {
        /// `recv_buffer_count`.
        recv_buffer_count: u32,
        /// `srq_size`.
        srq_size: u32,
        /// `recv_sges_per_wr`.
        recv_sges_per_wr: u32,
    },
    /// The receive pool is over 64 GiB.
    PoolTooLarge {
        /// `recv_buffer_count`.
        recv_buffer_count: u32,
        /// `recv_buffer_size`.
        recv_buffer_size: u32,
    },
    /// `signal_interval` is more than `sq_size`.
    SignalInterval {
        /// `signal_interval`.
        signal_interval: u32,
        /// `sq_size`.
        sq_size: u32,
    },
    /// Threads would sleep before they yield.
    Parking {
        /// `parking_park_after_ms`.
        park_after_ms: u128,
        /// `parking_yield_after_ms`.
        yield_after_ms: u128,
    },
}

impl Conflict {
    /// The keys involved, the blamed one first.
    pub fn keys(&self) -> &'static [&'static str] {
        match self {
            Conflict::ReceiveRequest { .. } => &["recv_buffer_size", "recv_sges_per_wr"],
            Conflict::PoolBelowSrq { .. } => &["recv_buffer_count", "srq_size", "recv_sges_per_wr"],
            Conflict::PoolTooLarge { .. } => &["recv_buffer_count", "recv_buffer_size"],
            Conflict::SignalInterval { .. } => &["signal_interval", "sq_size"],
            Conflict::Parking { .. } => &["parking_park_after_ms", "parking_yield_after_ms"],
        }
    }

    /// The rule broken, naming each key as `prefix` + key.
    pub fn describe(&self, prefix: &str) -> String {
        let [a, b, c] = [0, 1, 2].map(|i| self.keys().get(i).map(|k| format!("{prefix}{k}")).unwrap_or_default());
        match *self {
            Conflict::ReceiveRequest { recv_buffer_size: x, recv_sges_per_wr: y } => format!(
                "{a} = {x} × {b} = {y} = {} must be at most 2^31 (the bytes of one receive request)",
                u64::from(x) * u64::from(y)
            ),
            Conflict::PoolBelowSrq { recv_buffer_count: x, srq_size: s, recv_sges_per_wr: y } => format!(
                "{a} = {x} must be more than {b} × {c} = {} (the buffers the SRQ alone holds)",
                u64::from(s) * u64::from(y)
            ),
            Conflict::PoolTooLarge { recv_buffer_count: x, recv_buffer_size: y } => format!(
                "{a} = {x} × {b} = {y} is {} bytes of receive pool, more than 64 GiB",
                u64::from(x) * u64::from(y)
            ),
            Conflict::SignalInterval { signal_interval: x, sq_size: y } => {
                format!("{a} = {x} must be at most {b} = {y}")
            }
            Conflict::Parking { park_after_ms: x, yield_after_ms: y } => {
                format!("{a} = {x} must not be less than {b} = {y}")
            }
        }
    }
}

/// A configuration the device cannot hold (checked when the engine opened it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceLimitError {
    /// One key over one device attribute.
    #[error("{key} = {value} exceeds the device's {limit} of {max} (device {device})")]
    Exceeds {
        /// The key.
        key: &'static str,
        /// Its value.
        value: u64,
        /// The device attribute, e.g. `max_qp_wr`.
        limit: &'static str,
        /// The attribute's value.
        max: u64,
        /// The device.
        device: String,
    },
    /// The shared send completion queue holds every connection's send queue.
    #[error(
        "max_connections = {max_connections} with sq_size = {sq_size}: the send completion queue needs \
         max_connections × sq_size + 64 = {needed} entries, more than the device's max_cqe of {max_cqe} \
         (device {device})"
    )]
    SendCq {
        /// `max_connections`.
        max_connections: u32,
        /// `sq_size`.
        sq_size: u32,
        /// Entries needed.
        needed: u64,
        /// The device's `max_cqe`.
        max_cqe: u32,
        /// The device.
        device: String,
    },
    /// The receive completion queue holds the SRQ's requests.
    #[error(
        "srq_size = {srq_size}: the receive completion queue needs srq_size + 64 = {needed} entries, more than \
         the device's max_cqe of {max_cqe} (device {device})"
    )]
    RecvCq {
        /// `srq_size`.
        srq_size: u32,
        /// Entries needed.
        needed: u64,
        /// The device's `max_cqe`.
        max_cqe: u32,
        /// The device.
        device: String,
    },
    /// The receive pool is one memory region.
    #[error(
        "recv_buffer_count × recv_buffer_size = {bytes} bytes exceeds the device's max_mr_size of {max} \
         (device {device})"
    )]
    RecvPool {
        /// Bytes of the pool.
        bytes: u64,
        /// The device's `max_mr_size`.
        max: u64,
        /// The device.
        device: String,
    },
    /// Each send ring is one memory region.
    #[error("send_ring_size = {send_ring_size} exceeds the device's max_mr_size of {max} (device {device})")]
    SendRing {
        /// `send_ring_size`.
        send_ring_size: u32,
        /// The device's `max_mr_size`.
        max: u64,
        /// The device.
        device: String,
    },
}

/// Why a configuration is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No key has this name; the nearest known key, if one is close.
    #[error("unknown configuration key '{key}'{}", did_you_mean(.suggestion))]
    UnknownKey {
        /// The key as written (with the prefix).
        key: String,
        /// The nearest known key (with the prefix).
        suggestion: Option<String>,
    },
    /// A value that does not parse as its key's type.
    #[error("{key} = '{value}': {reason}")]
    BadValue {
        /// The key (with the prefix).
        key: String,
        /// The value, trimmed.
        value: String,
        /// What is wrong with it.
        reason: ValueError,
    },
    /// `node.<id>` whose id is not a node id.
    #[error("{key}: '{id}' is not a node id in [0, 65534]")]
    BadNodeId {
        /// The key (with the prefix).
        key: String,
        /// The text after `node.`.
        id: String,
    },
    /// A number outside its key's range.
    #[error("{key} = {value} {}", .range.requirement())]
    OutOfRange {
        /// The key (with the prefix).
        key: String,
        /// The value.
        value: u64,
        /// What the key accepts.
        range: Range,
    },
    /// Values of several keys that do not fit together.
    #[error("{}", .conflict.describe(.prefix))]
    Conflict {
        /// The prefix of the key names (`native.` from Java, else empty).
        prefix: String,
        /// The rule broken.
        conflict: Conflict,
    },
    /// A line that is not `key=value`.
    #[error("'{0}' is not key=value")]
    NotKeyValue(String),
    /// An error on a line of a file.
    #[error("line {line}: {source}")]
    Line {
        /// The line, from 1.
        line: usize,
        /// What is wrong on it.
        source: Box<ConfigError>,
    },
    /// The key of `auth_key_file` or `IBDXNET_AUTH_KEY` cannot be used.
    #[error(transparent)]
    AuthKey(#[from] AuthKeyError),
    /// `listen` cannot be bound.
    #[error("listen = {addr}: cannot bind the UDP socket: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The system's error.
        source: std::io::Error,
    },
    /// `device` names no device of the fabric (or the fabric has none).
    #[error("device (fabric {fabric}): {source}")]
    Device {
        /// The fabric.
        fabric: &'static str,
        /// What the fabric said.
        source: FabricError,
    },
    /// `port` cannot be used.
    #[error("port: {0}")]
    Port(FabricError),
    /// More than the device holds.
    #[error(transparent)]
    DeviceLimit(#[from] DeviceLimitError),
    /// A `node.<id>` entry the node table refused.
    #[error("node.{}: {source}", .id.0)]
    StartNode {
        /// The node.
        id: NodeId,
        /// Why the table refused it.
        source: NodeError,
    },
    /// `pin_threads` names a CPU the engine's threads may not use.
    #[error(
        "pin_threads: {thread}={cpu}: CPU {cpu} is not one the starting thread may run on (it may run on {allowed})"
    )]
    PinnedCpu {
        /// The thread.
        thread: &'static str,
        /// The CPU.
        cpu: usize,
        /// The CPUs the starting thread may run on, as the kernel lists them.
        allowed: String,
    },
    /// `pin_threads` is set but the CPUs this thread may use cannot be read.
    #[error("pin_threads: cannot read the CPUs the starting thread may run on: {0}")]
    Affinity(std::io::Error),
}

fn did_you_mean(suggestion: &Option<String>) -> String {
    suggestion.as_ref().map(|k| format!(" (did you mean '{k}'?)")).unwrap_or_default()
}
