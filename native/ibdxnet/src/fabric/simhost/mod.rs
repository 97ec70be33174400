//! `simhost`: the simulated RDMA fabric across the processes of one host.
//!
//! The semantics are `sim`'s (see [`crate::fabric::sim`]) wherever they
//! apply; what differs is how data travels. Processes cannot read each
//! other's memory, so every connected queue pair has a channel file (a
//! shared-memory file in the device directory, see `dir.rs`): the one the
//! remote queue pair writes messages into, a single-producer /
//! single-consumer byte ring (`ring.rs`). A message is copied into the
//! peer's ring (inline data at post time, registered memory when there is
//! room), in fragments of at most a quarter of the ring; the receiving
//! device's wire thread (`wire.rs`) takes an SRQ request, places the data,
//! queues the receive completion and only then frees the ring space. The
//! sender completes a request once the receiver freed its last fragment:
//! the completion comes after the data was placed, as on RC.
//!
//! * SGEs must lie in registered memory with the right key, else a
//!   protection-error completion and the QP goes to ERROR;
//! * the send queue holds `max_send_wr` requests; slots are freed when their
//!   (or a later signalled request's) completion is polled; posting more
//!   fails with `ENOMEM`;
//! * a receive request too small for the message: length error on the
//!   receiver, remote-invalid-request on the sender, both QPs to ERROR;
//!   an unregistered receive buffer: protection error on the receiver,
//!   remote-operation error on the sender, both to ERROR;
//! * an empty SRQ is receiver-not-ready: the message waits in the ring
//!   (without limit) and nothing after it on that QP overtakes it;
//! * a peer queue pair that is gone, in ERROR or connected elsewhere, or
//!   whose process died: the pending request completes with retry-exceeded,
//!   the rest are flushed. Death is seen through the device file's `flock`,
//!   checked every [`wire::LIVENESS_PERIOD`] while requests are outstanding
//!   (the wire thread wakes at least every 50 ms): within ~150 ms. A peer
//!   that exists but is not connected yet is waited for up to
//!   [`wire::CONNECT_BUDGET`] (hardware retries meanwhile), unlike `sim`;
//! * a completion queue that overflows reports [`FabricError::CqOverrun`];
//! * completion queues can always be armed: the wire thread, not polling,
//!   moves the data, so the wake descriptor fires at the next completion.
//!
//! Devices are addressed by a random 48-bit address (`sim_addr`, also in
//! the GID); `sim_network` is derived from the directory and the boot id,
//! so processes using the same directory share it and anything else is a
//! foreign endpoint. The link layer reported is [`LinkLayer::Sim`].
//!
//! Lock order: QP → SRQ → CQ; the memory table is read-locked inside.

mod copy;
mod dir;
mod qp;
mod queues;
mod ring;
mod shm;
mod wire;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

pub use dir::ENV_DIR;
pub use qp::SimHostQp;
pub use queues::{SimHostCq, SimHostSrq};

use super::simparts::{check_port_mtu, MrTable, Registration};
use super::{DeviceInfo, Fabric, FabricConfig, FabricError, FabricKind, Gid, LinkLayer, MemoryRegion, QpCaps};
use crate::util::lock;
use dir::{PeerDevice, Published};
use qp::QpCore;

/// Environment variable: bytes of each ring (a power of two, 4 KiB – 1 GiB).
pub const ENV_RING: &str = "IBDXNET_SIMHOST_RING";
/// Default bytes of each direction's ring of a connection.
pub const DEFAULT_RING_BYTES: u32 = 1 << 20;
/// Maximum inline bytes per send request.
pub const SIMHOST_MAX_INLINE: u32 = 512;

/// The shared state of one device.
#[derive(Debug)]
pub(crate) struct Device {
    info: DeviceInfo,
    dir: PathBuf,
    ring_bytes: u64,
    published: Arc<Published>,
    /// Registered memory.
    mrs: MrTable,
    qps: Mutex<HashMap<u32, Weak<QpCore>>>,
    next_qpn: AtomicU32,
    /// Devices talked to, by address.
    peers: Mutex<HashMap<u64, Arc<PeerDevice>>>,
    stopping: Arc<AtomicBool>,
    wire: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Device {
    fn check_range(&self, lkey: u32, addr: u64, len: u32) -> bool {
        self.mrs.check_range(lkey, addr, len)
    }

    /// Wakes this device's wire thread.
    fn kick(&self) {
        self.published.doorbell().ring();
    }

    /// The published device `addr`, if there is one (cached).
    fn peer(&self, addr: u64) -> Option<Arc<PeerDevice>> {
        let mut peers = lock(&self.peers);
        if let Some(p) = peers.get(&addr) {
            return Some(p.clone());
        }
        let p = Arc::new(PeerDevice::open(&self.dir, addr)?);
        // Forget dead devices no queue pair refers to any more.
        peers.retain(|_, d| Arc::strong_count(d) > 1 || d.alive());
        peers.insert(addr, p.clone());
        Some(p)
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Release);
        self.published.doorbell().force();
        if let Some(t) = lock(&self.wire).take() {
            // The last reference may be dropped by the wire thread itself.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

/// A device port of the host-wide simulator with its protection domain.
#[derive(Debug, Clone)]
pub struct SimHostFabric {
    dev: Arc<Device>,
}

impl SimHostFabric {
    /// The directory the device is published in.
    pub fn dir(&self) -> &std::path::Path {
        &self.dev.dir
    }
}

fn ring_bytes(cfg: &FabricConfig) -> Result<u64, FabricError> {
    let env = std::env::var(ENV_RING).ok().filter(|v| !v.trim().is_empty());
    let bytes = match (cfg.simhost.ring_bytes, env) {
        (0, Some(v)) => {
            v.trim().parse::<u64>().map_err(|e| FabricError::InvalidArgument(format!("{ENV_RING}={v}: {e}")))?
        }
        (0, None) => u64::from(DEFAULT_RING_BYTES),
        (n, _) => u64::from(n),
    };
    if !bytes.is_power_of_two() || !(4096..=1 << 30).contains(&bytes) {
        return Err(FabricError::InvalidArgument(format!(
            "simhost ring of {bytes} bytes: a power of two from 4096 to 1 GiB is needed"
        )));
    }
    Ok(bytes)
}

impl Fabric for SimHostFabric {
    type Mr = SimHostMr;
    type Cq = SimHostCq;
    type Srq = SimHostSrq;
    type Qp = SimHostQp;

    const KIND: FabricKind = FabricKind::SimHost;

    fn open(cfg: &FabricConfig) -> Result<Self, FabricError> {
        let port = check_port_mtu(cfg, "simhost")?;
        if let Some(want) = &cfg.device {
            if !want.starts_with("simhost") {
                return Err(FabricError::UnknownDevice { name: want.clone(), available: vec!["simhost<N>".into()] });
            }
        }
        let ring_bytes = ring_bytes(cfg)?;
        let dir = dir::resolve(cfg.simhost.dir.as_deref());
        let mut raw = [0u8; 8];
        crate::util::random_bytes(&mut raw);
        let addr = (u64::from_le_bytes(raw) & 0xFFFF_FFFF_FFFF).max(1);
        let published = Published::create(&dir, addr)
            .map_err(|e| FabricError::Unavailable(format!("simhost directory {}: {e}", dir.display())))?;
        let mut gid = [0u8; 16];
        gid[..2].copy_from_slice(&[0xfe, 0x80]);
        gid[10..].copy_from_slice(&addr.to_be_bytes()[2..]);
        let info = DeviceInfo {
            name: format!("simhost{addr:012x}"),
            port,
            link_layer: LinkLayer::Sim,
            lid: (addr & 0xFFFF) as u16,
            gid: Gid(gid),
            gid_index: None,
            active_mtu: cfg.sim.mtu,
            max_qp_wr: super::sim::SIM_MAX_QP_WR,
            max_sge: super::sim::SIM_MAX_SGE,
            max_srq_wr: super::sim::SIM_MAX_SRQ_WR,
            max_srq_sge: super::sim::SIM_MAX_SRQ_SGE,
            max_cqe: super::sim::SIM_MAX_CQE,
            max_mr_size: u64::MAX,
            sim_addr: addr,
            sim_network: dir::network_id(&dir),
        };
        let stopping = Arc::new(AtomicBool::new(false));
        let dev = Arc::new(Device {
            info,
            dir,
            ring_bytes,
            published: Arc::new(published),
            mrs: MrTable::default(),
            qps: Mutex::new(HashMap::new()),
            next_qpn: AtomicU32::new(0x11),
            peers: Mutex::new(HashMap::new()),
            stopping: stopping.clone(),
            wire: Mutex::new(None),
        });
        let (weak, published) = (Arc::downgrade(&dev), dev.published.clone());
        let t = std::thread::Builder::new()
            .name(format!("simhost-{addr:012x}"))
            .spawn(move || wire::run(weak, published, stopping))
            .map_err(|e| FabricError::Unavailable(format!("simhost wire thread: {e}")))?;
        *lock(&dev.wire) = Some(t);
        Ok(SimHostFabric { dev })
    }

    fn info(&self) -> &DeviceInfo {
        &self.dev.info
    }

    fn max_inline_data(&self) -> u32 {
        SIMHOST_MAX_INLINE
    }

    unsafe fn register(&self, addr: *mut u8, len: usize) -> Result<SimHostMr, FabricError> {
        Ok(SimHostMr(Registration::new(self.dev.clone(), addr, len)?))
    }

    fn create_cq(&self, cqe: u32) -> Result<SimHostCq, FabricError> {
        SimHostCq::new(self.dev.clone(), cqe)
    }

    fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<SimHostSrq, FabricError> {
        SimHostSrq::new(self.dev.clone(), max_wr, max_sge)
    }

    fn create_qp(
        &self,
        send_cq: &SimHostCq,
        recv_cq: &SimHostCq,
        srq: &SimHostSrq,
        caps: QpCaps,
    ) -> Result<SimHostQp, FabricError> {
        SimHostQp::new(self.dev.clone(), send_cq, recv_cq, srq, caps)
    }
}

/// A memory registration of `simhost`.
#[derive(Debug)]
pub struct SimHostMr(Registration<Device>);

impl AsRef<MrTable> for Device {
    fn as_ref(&self) -> &MrTable {
        &self.mrs
    }
}

impl MemoryRegion for SimHostMr {
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
