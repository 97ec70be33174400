//! The configuration keys, defined once: each row of [`KEYS`] gives the
//! key, its type, its default, its range and its meaning, and reaches its
//! field through the codec of its type. `set`, per-key validation, the text
//! form, the defaults and the table in docs/configuration.md are all read from it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::error::ValueError;
use super::pins::ThreadPins;
use super::{EngineConfig, EngineThreads};
use crate::con::node::resolve_address;
use crate::con::proto::{MAX_FLOW_UNIT, MIN_FLOW_UNIT};
use crate::con::NodeId;
use crate::fabric::FabricKind;

/// One configuration key.
pub struct Key {
    /// The key of the text form.
    pub name: &'static str,
    /// What a value looks like (for the documentation).
    pub kind: &'static str,
    /// The default, in the text form.
    pub default: &'static str,
    /// The accepted values beyond the type.
    pub range: Range,
    /// What it means.
    pub doc: &'static str,
    /// Parses a value into the field; the error gives only the reason.
    pub(super) set: fn(&mut EngineConfig, &str) -> Result<(), ValueError>,
    /// The field's value in the text form.
    pub(super) get: fn(&EngineConfig) -> String,
    /// The field's value as a number, for the range check.
    pub(super) number: fn(&EngineConfig) -> Option<u64>,
}

/// Values a numeric key accepts (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// Whatever the type accepts.
    Any,
    /// `[min, max]`.
    Int(u64, u64),
    /// A power of two in `[min, max]`.
    Pow2(u64, u64),
}

impl Range {
    /// Whether `v` is accepted.
    pub fn contains(self, v: u64) -> bool {
        match self {
            Range::Any => true,
            Range::Int(min, max) => (min..=max).contains(&v),
            Range::Pow2(min, max) => (min..=max).contains(&v) && v.is_power_of_two(),
        }
    }

    /// The rule as an error says it: `must be in [1, 4]`.
    pub fn requirement(self) -> String {
        match self {
            Range::Any => String::new(),
            Range::Int(..) => format!("must be in {}", self.text()),
            Range::Pow2(..) => format!("must be {}", self.text()),
        }
    }

    /// The rule as the documentation and the errors say it.
    pub fn text(self) -> String {
        match self {
            Range::Any => String::new(),
            Range::Int(min, max) => format!("[{min}, {max}]"),
            Range::Pow2(min, max) => format!("a power of two in [{min}, {max}]"),
        }
    }
}

/// The text form of one value type.
pub(super) trait Codec {
    type T;
    const KIND: &'static str;
    fn parse(v: &str) -> Result<Self::T, ValueError>;
    fn show(v: &Self::T) -> String;
    fn number(_: &Self::T) -> Option<u64> {
        None
    }
}

fn unsigned(v: &str) -> Result<u64, ValueError> {
    v.parse::<u64>().map_err(ValueError::NotUnsigned)
}

fn narrow<T: TryFrom<u64>>(n: u64, max: u64) -> Result<T, ValueError> {
    T::try_from(n).map_err(|_| ValueError::TooLarge(max))
}

pub(super) struct U32;
impl Codec for U32 {
    type T = u32;
    const KIND: &'static str = "integer";
    fn parse(v: &str) -> Result<u32, ValueError> {
        narrow(unsigned(v)?, u32::MAX.into())
    }
    fn show(v: &u32) -> String {
        v.to_string()
    }
    fn number(v: &u32) -> Option<u64> {
        Some((*v).into())
    }
}

pub(super) struct U64;
impl Codec for U64 {
    type T = u64;
    const KIND: &'static str = "integer";
    fn parse(v: &str) -> Result<u64, ValueError> {
        unsigned(v)
    }
    fn show(v: &u64) -> String {
        v.to_string()
    }
    fn number(v: &u64) -> Option<u64> {
        Some(*v)
    }
}

pub(super) struct U8;
impl Codec for U8 {
    type T = u8;
    const KIND: &'static str = "integer";
    fn parse(v: &str) -> Result<u8, ValueError> {
        narrow(unsigned(v)?, 255)
    }
    fn show(v: &u8) -> String {
        v.to_string()
    }
    fn number(v: &u8) -> Option<u64> {
        Some((*v).into())
    }
}

/// A byte, or empty for "choose for me".
pub(super) struct OptU8;
impl Codec for OptU8 {
    type T = Option<u8>;
    const KIND: &'static str = "integer or empty";
    fn parse(v: &str) -> Result<Option<u8>, ValueError> {
        if v.is_empty() {
            Ok(None)
        } else {
            U8::parse(v).map(Some)
        }
    }
    fn show(v: &Option<u8>) -> String {
        v.map(|g| g.to_string()).unwrap_or_default()
    }
}

/// `true` or `false`.
pub(super) struct Bool;
impl Codec for Bool {
    type T = bool;
    const KIND: &'static str = "true or false";
    fn parse(v: &str) -> Result<bool, ValueError> {
        match v {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(ValueError::NotBool),
        }
    }
    fn show(v: &bool) -> String {
        v.to_string()
    }
}

pub(super) struct Millis;
impl Codec for Millis {
    type T = Duration;
    const KIND: &'static str = "milliseconds";
    fn parse(v: &str) -> Result<Duration, ValueError> {
        unsigned(v).map(Duration::from_millis)
    }
    fn show(v: &Duration) -> String {
        v.as_millis().to_string()
    }
    fn number(v: &Duration) -> Option<u64> {
        Some(u64::try_from(v.as_millis()).unwrap_or(u64::MAX))
    }
}

pub(super) struct Nanos;
impl Codec for Nanos {
    type T = Duration;
    const KIND: &'static str = "nanoseconds";
    fn parse(v: &str) -> Result<Duration, ValueError> {
        unsigned(v).map(Duration::from_nanos)
    }
    fn show(v: &Duration) -> String {
        v.as_nanos().to_string()
    }
    fn number(v: &Duration) -> Option<u64> {
        Some(u64::try_from(v.as_nanos()).unwrap_or(u64::MAX))
    }
}

pub(super) struct MicrosOrNever;
impl Codec for MicrosOrNever {
    type T = Option<Duration>;
    const KIND: &'static str = "microseconds or `never`";
    fn parse(v: &str) -> Result<Option<Duration>, ValueError> {
        if v == "never" {
            return Ok(None);
        }
        unsigned(v).map(|us| Some(Duration::from_micros(us)))
    }
    fn show(v: &Option<Duration>) -> String {
        v.map_or_else(|| "never".to_string(), |d| d.as_micros().to_string())
    }
    fn number(v: &Option<Duration>) -> Option<u64> {
        v.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }
}

pub(super) struct Node;
impl Codec for Node {
    type T = NodeId;
    const KIND: &'static str = "node id";
    fn parse(v: &str) -> Result<NodeId, ValueError> {
        let n = unsigned(v)?;
        narrow(n, 65534).ok().and_then(NodeId::new).ok_or(ValueError::NotNodeId(n))
    }
    fn show(v: &NodeId) -> String {
        v.0.to_string()
    }
    fn number(v: &NodeId) -> Option<u64> {
        Some(v.0.into())
    }
}

pub(super) struct Addr;
impl Codec for Addr {
    type T = SocketAddr;
    const KIND: &'static str = "host:port";
    fn parse(v: &str) -> Result<SocketAddr, ValueError> {
        Ok(resolve_address(v)?)
    }
    fn show(v: &SocketAddr) -> String {
        v.to_string()
    }
}

pub(super) struct Fabric;
impl Codec for Fabric {
    type T = FabricKind;
    const KIND: &'static str = "auto, verbs, sim or simhost";
    fn parse(v: &str) -> Result<FabricKind, ValueError> {
        Ok(FabricKind::parse(v)?)
    }
    fn show(v: &FabricKind) -> String {
        v.name().into()
    }
}

/// Free text, empty for none.
pub(super) struct Name;
impl Codec for Name {
    type T = Option<String>;
    const KIND: &'static str = "name or empty";
    fn parse(v: &str) -> Result<Option<String>, ValueError> {
        Ok((!v.is_empty()).then(|| v.to_string()))
    }
    fn show(v: &Option<String>) -> String {
        v.clone().unwrap_or_default()
    }
}

pub(super) struct File;
impl Codec for File {
    type T = Option<PathBuf>;
    const KIND: &'static str = "path or empty";
    fn parse(v: &str) -> Result<Option<PathBuf>, ValueError> {
        Ok((!v.is_empty()).then(|| PathBuf::from(v)))
    }
    fn show(v: &Option<PathBuf>) -> String {
        v.as_deref().map(|p| p.display().to_string()).unwrap_or_default()
    }
}

/// Engine threads pinned to CPUs ([`ThreadPins`]).
pub(super) struct Pins;
impl Codec for Pins {
    type T = ThreadPins;
    const KIND: &'static str = "thread=CPU list or empty";
    fn parse(v: &str) -> Result<ThreadPins, ValueError> {
        Ok(ThreadPins::parse(v)?)
    }
    fn show(v: &ThreadPins) -> String {
        v.to_string()
    }
}

/// `dedicated` or `shared` ([`EngineThreads`]).
pub(super) struct Threads;
impl Codec for Threads {
    type T = EngineThreads;
    const KIND: &'static str = "dedicated or shared";
    fn parse(v: &str) -> Result<EngineThreads, ValueError> {
        match v {
            "dedicated" => Ok(EngineThreads::Dedicated),
            "shared" => Ok(EngineThreads::Shared),
            _ => Err(ValueError::NotEngineThreads),
        }
    }
    fn show(v: &EngineThreads) -> String {
        v.name().into()
    }
}

/// One row of [`KEYS`]: `key!(name, Codec, field.path, default, range, doc)`.
macro_rules! key {
    ($name:literal, $codec:ident, $($field:ident).+, $default:literal, $range:expr, $doc:literal) => {
        Key {
            name: $name,
            kind: <$codec as Codec>::KIND,
            default: $default,
            range: $range,
            doc: $doc,
            set: |c, v| {
                c.$($field).+ = <$codec as Codec>::parse(v)?;
                Ok(())
            },
            get: |c| <$codec as Codec>::show(&c.$($field).+),
            number: |c| <$codec as Codec>::number(&c.$($field).+),
        }
    };
}

use Range::{Any, Int, Pow2};

/// Largest connect timeout and parking threshold in ms (one day): bounded
/// so that deadlines computed from them cannot overflow.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;
/// Largest exchange retry and discovery interval in ms (one hour).
pub const MAX_INTERVAL_MS: u64 = 3_600_000;
/// Largest accepted `max_inline` (devices cap it far lower; this only
/// rejects nonsense before the device is asked).
pub const MAX_INLINE_LIMIT: u64 = 4096;

/// Every key of the text form, in the order of [`EngineConfig::to_text`]
/// (`node.<id>` entries are the node table, see [`EngineConfig::set`]).
/// Defaults are the paper's Table 2 values where it gives one.
#[rustfmt::skip]
pub static KEYS: &[Key] = &[
    key!("node_id", Node, node_id, "0", Int(0, 65534),
        "this node's id (65535 is reserved as invalid)"),
    key!("listen", Addr, listen, "0.0.0.0:5730", Any,
        "UDP address of the connection manager; peers accept its packets only from the address their node table gives"),
    key!("fabric", Fabric, fabric, "auto", Any,
        "`auto`: verbs if the host has an RDMA device, else the in-process sim; `simhost`: the sim across the \
         processes of this host (shared memory, directory `IBDXNET_SIMHOST_DIR`); `IBDXNET_FABRIC` overrides"),
    key!("device", Name, device.device, "", Any,
        "RDMA device name; empty: the first device"),
    key!("port", U8, device.port, "1", Int(0, 255),
        "device port (0 means 1)"),
    key!("gid_index", OptU8, device.gid_index, "", Any,
        "RoCE GID index; empty: the RoCE v2 IPv4-mapped entry, else the first RoCE v2 entry, else 0"),
    key!("qp_ack_timeout", U8, device.ack_timeout, "16", Int(0, 31),
        "verbs RC queue pairs: ACK timeout per try, 4.096 µs × 2^value (16 ≈ 268 ms, so a dead peer fails a send after ≈ 1.9 s with `qp_retry_count` 6; 0 waits forever); lower detects dead peers sooner, but late acknowledgements (a slow or lossy link) then exhaust the retries"),
    key!("qp_retry_count", U8, device.retry_count, "6", Int(0, 7),
        "verbs RC queue pairs: retries after an ACK timeout or sequence error before the connection fails (retry exceeded); Soft-RoCE retries forever at 7"),
    key!("max_connections", U32, max_connections, "100", Int(1, 0xFFFE),
        "connections open at once; the least recently used idle one is evicted beyond (see `evict_at_limit`)"),
    key!("evict_at_limit", Bool, evict_at_limit, "true", Any,
        "evict the least recently used idle connection beyond `max_connections`; false: the limit only sizes the completion queues (the upstream DXNet drop-in's default)"),
    key!("send_ring_size", U32, send_ring_size, "4194304", Pow2(4096, 1 << 30),
        "bytes of each connection's send ring"),
    key!("sq_size", U32, sq_size, "20", Int(1, 1 << 16),
        "send queue depth per connection"),
    key!("srq_size", U32, srq_size, "2000", Int(1, 1 << 20),
        "shared receive queue depth"),
    key!("recv_buffer_size", U32, recv_buffer_size, "32768", Int(64, 1 << 30),
        "bytes of one receive buffer; × `recv_sges_per_wr` is one receive request, the largest send request (at most 2^31)"),
    key!("recv_sges_per_wr", U32, recv_sges_per_wr, "4", Int(1, 32),
        "receive buffers per receive request"),
    key!("recv_buffer_count", U32, recv_buffer_count, "16384", Int(1, 1 << 24),
        "receive buffers in the pool; more than `srq_size` × `recv_sges_per_wr`, at most 64 GiB"),
    key!("recv_slab_buffers", U32, recv_slab_buffers, "512", Int(1, 1 << 24),
        "receive buffers per slab of the pool: one slab is registered at start, more as buffers run short (up to `recv_buffer_count`), and a slab idle for 3 s is given back (raised to `recv_sges_per_wr`, capped at `recv_buffer_count`)"),
    key!("incoming_ring_size", U32, incoming_ring_size, "8192", Pow2(2, 1 << 24),
        "entries of the incoming ring"),
    key!("signal_interval", U32, signal_interval, "4", Int(1, 1 << 16),
        "signal every k-th send request and the last of each batch; at most `sq_size`"),
    key!("max_inline", U32, max_inline, "128", Int(0, MAX_INLINE_LIMIT),
        "send requests up to this many bytes inline (capped by the device)"),
    key!("poll_batch", U32, poll_batch, "32", Int(1, 4096),
        "completions polled per call"),
    key!("flow_control_unit", U64, flow_control_unit, "1677721", Int(MIN_FLOW_UNIT, MAX_FLOW_UNIT),
        "bytes one flow-control confirmation stands for in what this node sends (Java sets it to `flowControlWindow` × `flowControlThreshold`); each connection's exchange tells the peer, which confirms this node's bytes in it"),
    key!("connect_timeout_ms", Millis, connect_timeout, "10000", Int(1, MAX_TIMEOUT_MS),
        "how long a caller waits for a connection to come up"),
    key!("exchange_retry_ms", Millis, exchange_retry, "100", Int(1, MAX_INTERVAL_MS),
        "interval of exchange retransmissions while a connection is pending"),
    key!("discovery_interval_ms", Millis, discovery_interval, "1000", Int(1, MAX_INTERVAL_MS),
        "interval of discovery rounds for nodes not yet discovered"),
    key!("parking_yield_after_ms", Millis, parking.yield_after, "0", Int(0, MAX_TIMEOUT_MS),
        "send and receive threads yield after this long without work (the paper: 100, for a free core per thread)"),
    key!("parking_park_after_ms", Millis, parking.park_after, "1000", Int(0, MAX_TIMEOUT_MS),
        "… and sleep after this long (at least `parking_yield_after_ms`)"),
    key!("parking_park_for_ns", Nanos, parking.park_for, "1", Int(0, 100_000_000),
        "sleep per idle iteration once parked"),
    key!("parking_sleep_after_us", MicrosOrNever, parking.sleep_after, "1000", Int(0, MAX_TIMEOUT_MS * 1000),
        "block until woken (new data, a completion, a returned buffer) after this long without work, whatever the phase; `never`: poll as the paper does"),
    key!("pin_threads", Pins, pin_threads, "", Any,
        "pin engine threads to CPUs, e.g. `send=0,recv=1` (`job=2` pins the connection manager); each CPU must be one the starting thread may run on, else the engine does not start; empty: none pinned"),
    key!("engine_threads", Threads, engine_threads, "dedicated", Any,
        "`dedicated`: a send and a receive thread per node; `shared`: one thread per node does the send work, then the receive work, each iteration, and sleeps only when both are idle (pinned by `pin_threads`' `send` entry)"),
    key!("send_from_caller", Bool, send_from_caller, "true", Any,
        "a user's thread that publishes data while the send thread is idle or asleep posts it itself (one hand-off less per message); `false`: it always wakes the send thread"),
    key!("send_from_caller_max_bytes", U32, send_from_caller_max_bytes, "4096", Int(0, 1 << 30),
        "… for records up to this many bytes; a larger one is left to the send thread, which posts it while the user writes the next (on `sim` a post copies the data)"),
    key!("recv_from_caller", Bool, recv_from_caller, "true", Any,
        "a user's thread waiting for a response polls the receive side itself while it waits (the receive thread sleeps meanwhile): the response reaches it without two wake-ups; `false`: it waits for the receive thread"),
    key!("stats_timers", Bool, stats_timers, "false", Any,
        "time the send and receive threads' operations (post, poll, up-call: count, total, best, worst, percentiles) for the statistics map and the print thread; off by default: ≈ 60 ns per timed operation, up to ~5 % of the engine's CPU time with small work requests"),
    key!("stats_print_interval_ms", Millis, stats_print_interval, "0", Int(0, MAX_INTERVAL_MS),
        "log the engine's counters and timers (target `ibdxnet::stats`, INFO) this often, and once at shutdown; 0: never"),
    key!("auth_key_file", File, auth_key_file, "", Any,
        "file holding the pre-shared key of the control plane (owner-only); empty: `IBDXNET_AUTH_KEY`, else no key"),
];

/// The key named `name`.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The known key nearest to `unknown` (by edit distance), if one is close.
pub fn nearest(unknown: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|k| (distance(unknown, k.name), k.name))
        .filter(|(d, name)| *d <= 2.max(name.len() / 3))
        .min()
        .map(|(_, name)| name)
}

/// Levenshtein distance over bytes.
fn distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The table in docs/configuration.md of the engine's keys (Markdown).
pub fn markdown_table() -> String {
    let mut s = String::from("| key | type | default | range | meaning |\n|---|---|---|---|---|\n");
    for k in KEYS {
        let default = if k.default.is_empty() { "—".to_string() } else { format!("`{}`", k.default) };
        s += &format!("| `{}` | {} | {} | {} | {} |\n", k.name, k.kind, default, k.range.text(), k.doc);
    }
    s += "| `node.<id>` | host:port | — | | a peer's connection manager, in the node table before the first packet is read; more at run time with `add_node` |\n";
    s
}
