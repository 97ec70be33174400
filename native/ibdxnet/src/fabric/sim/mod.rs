//! `sim`: an in-process RDMA fabric with reliable-connected semantics.
//!
//! Devices join a [`SimNetwork`] (the process-wide default one unless a test
//! brings its own) and get a unique address, which plays the role of LID/GID.
//! A SEND is delivered in the posting thread when it can be: the receiver's
//! SRQ request is consumed, the data is gathered from the sender's registered
//! memory and scattered over the request's SGEs, and completions are queued on
//! both sides. What the hardware does on failure, the simulator does too:
//!
//! * SGEs must lie in registered memory with the right key, else a
//!   protection-error completion and the QP goes to ERROR;
//! * the send queue holds `max_send_wr` requests; slots are freed when their
//!   (or a later signalled request's) completion is polled; posting more
//!   fails with `ENOMEM`;
//! * inline data is copied at post time, other data when it is "on the wire";
//! * a receive request too small for the message: length error on the
//!   receiver, remote-invalid-request on the sender, both QPs to ERROR;
//! * an empty SRQ is receiver-not-ready: the message waits (retried without
//!   limit, like `rnr_retry = 7`) and nothing after it on that QP overtakes it;
//!   each receive request posted releases the oldest waiting queue pair (a
//!   retry due at that moment may come first);
//! * a peer that is gone, not connected or in ERROR, or a cut link: the
//!   pending request completes with retry-exceeded, the rest are flushed;
//!   a cut link only once it has been down longer than the network's retry
//!   budget ([`SimNetwork::set_retry_budget`], default zero): shorter cuts
//!   delay messages without loss;
//! * a completion queue that overflows reports [`FabricError::CqOverrun`].
//!
//! Time-based behaviour (injected delay, bandwidth throttling, RNR retries)
//! advances on the network's own thread when due, and whenever any completion
//! queue of the network is polled (`timers.rs`).
//!
//! Lock order: QP send state → SRQ → CQ → network timers. Nothing takes a
//! QP's send state while holding an SRQ or CQ lock.

mod qp;
mod queues;
mod timers;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

pub use qp::SimQp;
pub use queues::{SimCq, SimSrq};

use super::simparts::{check_port_mtu, MrMap, MrTable, Registration};
use super::{DeviceInfo, Fabric, FabricConfig, FabricError, FabricKind, Gid, LinkLayer, MemoryRegion, QpCaps};
use crate::util::lock;
use qp::QpCore;
use timers::Timers;

/// Device limits of the simulator (in the range of a ConnectX HCA).
pub const SIM_MAX_QP_WR: u32 = 32_768;
/// Maximum SGEs per request.
pub const SIM_MAX_SGE: u32 = 32;
/// Maximum SRQ depth.
pub const SIM_MAX_SRQ_WR: u32 = 32_768;
/// Maximum SGEs per SRQ request.
pub const SIM_MAX_SRQ_SGE: u32 = 32;
/// Maximum completion queue entries.
pub const SIM_MAX_CQE: u32 = 4_194_303;
/// Maximum inline bytes per send request.
pub const SIM_MAX_INLINE: u32 = 512;
/// Interval at which a message over a cut link is retried.
const LINK_RETRY_INTERVAL: Duration = Duration::from_micros(200);
/// Default interval at which a receiver-not-ready message is retried
/// ([`SimNetwork::set_rnr_retry_interval`]).
const RNR_RETRY_INTERVAL: Duration = Duration::from_micros(200);

/// A set of simulated devices that can reach each other.
#[derive(Debug, Default)]
pub struct SimNetwork {
    /// Random, never 0: tells this network's endpoints from another
    /// process's (whose addresses and QPNs repeat ours).
    id: u64,
    next_addr: AtomicU64,
    devices: Mutex<HashMap<u64, Weak<SimDevice>>>,
    timers: Arc<Timers>,
    /// How long a message waits for a cut link before retry-exceeded (ns).
    retry_budget_ns: AtomicU64,
    /// Receiver-not-ready retry interval (ns).
    rnr_retry_ns: AtomicU64,
}

impl SimNetwork {
    /// A new, empty network (tests use one each to stay independent).
    pub fn new() -> Arc<SimNetwork> {
        let id = (u64::from(crate::util::random_u32()) << 32 | u64::from(crate::util::random_u32())).max(1);
        Arc::new(SimNetwork {
            id,
            next_addr: AtomicU64::new(1),
            devices: Mutex::default(),
            timers: Arc::default(),
            retry_budget_ns: AtomicU64::new(0),
            rnr_retry_ns: AtomicU64::new(RNR_RETRY_INTERVAL.as_nanos() as u64),
        })
    }

    /// This network's id (random, never 0), carried in every endpoint.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The process-wide default network.
    pub fn global() -> Arc<SimNetwork> {
        static GLOBAL: OnceLock<Arc<SimNetwork>> = OnceLock::new();
        GLOBAL.get_or_init(SimNetwork::new).clone()
    }

    /// How long the transport retries a message over a cut link before it
    /// completes with retry-exceeded (the hardware's `retry_cnt` × timeout).
    /// Zero, the default, fails at once. Cuts shorter than the budget delay
    /// messages without loss.
    pub fn set_retry_budget(&self, budget: Duration) {
        self.retry_budget_ns.store(budget.as_nanos().min(u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }

    /// The retry budget (see [`SimNetwork::set_retry_budget`]).
    pub fn retry_budget(&self) -> Duration {
        Duration::from_nanos(self.retry_budget_ns.load(Ordering::Relaxed))
    }

    /// How often a message waiting for a receive request (receiver not
    /// ready) is tried again besides being released by the receiver's next
    /// posted request (default 200 µs); the retry notices a peer that went
    /// away meanwhile, and may take a request before an older waiter.
    pub fn set_rnr_retry_interval(&self, every: Duration) {
        self.rnr_retry_ns.store(every.as_nanos().clamp(1, u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }

    /// The receiver-not-ready retry interval (see [`SimNetwork::set_rnr_retry_interval`]).
    pub fn rnr_retry_interval(&self) -> Duration {
        Duration::from_nanos(self.rnr_retry_ns.load(Ordering::Relaxed))
    }

    fn device(&self, addr: u64) -> Option<Arc<SimDevice>> {
        lock(&self.devices).get(&addr).and_then(Weak::upgrade)
    }

    fn all_devices(&self) -> Vec<Arc<SimDevice>> {
        lock(&self.devices).values().filter_map(Weak::upgrade).collect()
    }

    /// Arms a timer: `qp` is pumped again once `at` has passed.
    fn arm_timer(&self, at: Instant, qp: Weak<QpCore>) {
        self.timers.arm(at, qp);
    }

    /// Runs due timers: delayed, throttled and receiver-not-ready messages.
    fn progress(&self) {
        self.timers.progress();
    }
}

impl Drop for SimNetwork {
    fn drop(&mut self) {
        self.timers.close();
    }
}

/// Runs `f` with the memory tables of `src` and `dst` read-locked, taken in
/// address order so two deliveries in opposite directions cannot deadlock
/// against a waiting (de)registration.
pub(crate) fn with_mrs<R>(src: &SimDevice, dst: &SimDevice, f: impl FnOnce(&MrMap, &MrMap) -> R) -> R {
    fn read(d: &SimDevice) -> std::sync::RwLockReadGuard<'_, MrMap> {
        d.mrs.read()
    }
    if std::ptr::eq(src, dst) {
        let g = read(src);
        return f(&g, &g);
    }
    if src.info.sim_addr < dst.info.sim_addr {
        let gs = read(src);
        let gd = read(dst);
        f(&gs, &gd)
    } else {
        let gd = read(dst);
        let gs = read(src);
        f(&gs, &gd)
    }
}

/// Fault injection state of one device; applies to traffic it sends, and a
/// cut link also to traffic addressed to it.
#[derive(Debug, Default)]
struct Faults {
    link_down: AtomicBool,
    delay_ns: AtomicU64,
    /// 0 = unlimited.
    bytes_per_sec: AtomicU64,
    /// When the throttled "wire" is free again.
    wire_free_at: Mutex<Option<Instant>>,
}

/// The shared state of one simulated device.
#[derive(Debug)]
pub(crate) struct SimDevice {
    net: Arc<SimNetwork>,
    info: DeviceInfo,
    /// Registered memory.
    mrs: MrTable,
    qps: Mutex<HashMap<u32, Weak<QpCore>>>,
    next_qpn: AtomicU32,
    faults: Faults,
}

impl SimDevice {
    /// True if `[addr, addr+len)` lies inside the region registered under `lkey`.
    fn check_range(&self, lkey: u32, addr: u64, len: u32) -> bool {
        self.mrs.check_range(lkey, addr, len)
    }

    fn qp(&self, qpn: u32) -> Option<Arc<QpCore>> {
        lock(&self.qps).get(&qpn).and_then(Weak::upgrade)
    }

    fn link_down(&self) -> bool {
        self.faults.link_down.load(Ordering::Acquire)
    }

    /// When a message of `len` bytes posted now arrives at the receiver,
    /// or `None` for "now" (no delay, no throttling).
    fn arrival_time(&self, len: u64) -> Option<Instant> {
        let delay = self.faults.delay_ns.load(Ordering::Relaxed);
        let bps = self.faults.bytes_per_sec.load(Ordering::Relaxed);
        if delay == 0 && bps == 0 {
            return None;
        }
        let now = Instant::now();
        let mut sent = now;
        if let Some(ns) = len.saturating_mul(1_000_000_000).checked_div(bps) {
            let mut free = lock(&self.faults.wire_free_at);
            let start = free.map_or(now, |f| f.max(now));
            sent = start + Duration::from_nanos(ns);
            *free = Some(sent);
        }
        Some(sent + Duration::from_nanos(delay))
    }
}

/// A simulated device port with its protection domain.
#[derive(Debug, Clone)]
pub struct SimFabric {
    dev: Arc<SimDevice>,
}

impl SimFabric {
    /// The network this device belongs to.
    pub fn network(&self) -> &Arc<SimNetwork> {
        &self.dev.net
    }

    /// Cuts (`false`) or restores (`true`) this device's link. While cut,
    /// every message from or to the device waits; once it waited longer
    /// than the network's retry budget, it fails with retry-exceeded.
    pub fn set_link_up(&self, up: bool) {
        self.dev.faults.link_down.store(!up, Ordering::Release);
        // Down: fail what is queued now, on both ends, like the hardware's
        // retry timer eventually would (or start the retry budget). Up:
        // resume what waited within the budget.
        for dev in self.dev.net.all_devices() {
            let qps: Vec<_> = lock(&dev.qps).values().filter_map(Weak::upgrade).collect();
            for qp in qps {
                qp.pump();
            }
        }
    }

    /// Adds a fixed latency to every message this device sends.
    pub fn set_delay(&self, delay: Duration) {
        self.dev.faults.delay_ns.store(delay.as_nanos().min(u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }

    /// Limits the bandwidth of messages this device sends (`None` = unlimited).
    pub fn set_bandwidth(&self, bytes_per_sec: Option<u64>) {
        self.dev.faults.bytes_per_sec.store(bytes_per_sec.unwrap_or(0), Ordering::Relaxed);
        if bytes_per_sec.is_none() {
            *lock(&self.dev.faults.wire_free_at) = None;
        }
    }
}

impl Fabric for SimFabric {
    type Mr = SimMr;
    type Cq = SimCq;
    type Srq = SimSrq;
    type Qp = SimQp;

    const KIND: FabricKind = FabricKind::Sim;

    fn open(cfg: &FabricConfig) -> Result<Self, FabricError> {
        let net = cfg.sim.network.clone().unwrap_or_else(SimNetwork::global);
        let port = check_port_mtu(cfg, "sim")?;
        let addr = net.next_addr.fetch_add(1, Ordering::Relaxed);
        let name = format!("sim{addr}");
        if let Some(want) = &cfg.device {
            if !want.starts_with("sim") {
                return Err(FabricError::UnknownDevice { name: want.clone(), available: vec!["sim<N>".into()] });
            }
        }
        let info = DeviceInfo {
            name,
            port,
            link_layer: LinkLayer::Sim,
            lid: (addr & 0xFFFF) as u16,
            gid: Gid::default(),
            gid_index: None,
            active_mtu: cfg.sim.mtu,
            max_qp_wr: SIM_MAX_QP_WR,
            max_sge: SIM_MAX_SGE,
            max_srq_wr: SIM_MAX_SRQ_WR,
            max_srq_sge: SIM_MAX_SRQ_SGE,
            max_cqe: SIM_MAX_CQE,
            max_mr_size: u64::MAX,
            sim_addr: addr,
            sim_network: net.id,
        };
        let dev = Arc::new(SimDevice {
            net: net.clone(),
            info,
            mrs: MrTable::default(),
            qps: Mutex::new(HashMap::new()),
            next_qpn: AtomicU32::new(0x11),
            faults: Faults::default(),
        });
        lock(&net.devices).insert(addr, Arc::downgrade(&dev));
        Ok(SimFabric { dev })
    }

    fn info(&self) -> &DeviceInfo {
        &self.dev.info
    }

    fn max_inline_data(&self) -> u32 {
        SIM_MAX_INLINE
    }

    unsafe fn register(&self, addr: *mut u8, len: usize) -> Result<SimMr, FabricError> {
        Ok(SimMr(Registration::new(self.dev.clone(), addr, len)?))
    }

    fn create_cq(&self, cqe: u32) -> Result<SimCq, FabricError> {
        SimCq::new(self.dev.clone(), cqe)
    }

    fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<SimSrq, FabricError> {
        SimSrq::new(self.dev.clone(), max_wr, max_sge)
    }

    fn create_qp(&self, send_cq: &SimCq, recv_cq: &SimCq, srq: &SimSrq, caps: QpCaps) -> Result<SimQp, FabricError> {
        SimQp::new(self.dev.clone(), send_cq, recv_cq, srq, caps)
    }
}

impl Drop for SimDevice {
    fn drop(&mut self) {
        let mut devices = lock(&self.net.devices);
        if devices.get(&self.info.sim_addr).is_some_and(|w| w.strong_count() == 0) {
            devices.remove(&self.info.sim_addr);
        }
    }
}

/// A simulated memory registration.
#[derive(Debug)]
pub struct SimMr(Registration<SimDevice>);

impl AsRef<MrTable> for SimDevice {
    fn as_ref(&self) -> &MrTable {
        &self.mrs
    }
}

impl MemoryRegion for SimMr {
    fn addr(&self) -> *mut u8 {
        self.0.addr
    }
    fn len(&self) -> usize {
        self.0.len
    }
    fn lkey(&self) -> u32 {
        self.0.lkey
    }
}
