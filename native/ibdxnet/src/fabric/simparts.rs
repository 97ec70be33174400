//! What both simulated fabrics (`sim`, `simhost`) share besides their
//! completion queue (`simcq.rs`): the checks of `open`, the memory table and
//! its registrations, the limits of SRQs and queue pairs, queueing receive
//! requests, turning a send request into a message's payload, and the
//! endpoint checks of `connect`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use crate::fabric::{
    DeviceInfo, FabricConfig, FabricError, PostError, QpCaps, QpEndpoint, RecvBatch, SendBatch, SendFlags, Sge,
    WcStatus,
};

/// The port (always 1) a simulated device of `device` opens, once `cfg`'s
/// port and MTU are checked.
pub(crate) fn check_port_mtu(cfg: &FabricConfig, device: &str) -> Result<u8, FabricError> {
    let port = cfg.port_or_default();
    if port != 1 {
        return Err(FabricError::BadPort {
            device: device.into(),
            port,
            reason: "simulated devices have one port (1)".into(),
        });
    }
    if !matches!(cfg.sim.mtu, 256 | 512 | 1024 | 2048 | 4096) {
        return Err(FabricError::InvalidArgument(format!(
            "sim mtu {} is not one of 256, 512, 1024, 2048, 4096",
            cfg.sim.mtu
        )));
    }
    Ok(port)
}

/// lkey → (start address, length).
pub(crate) type MrMap = HashMap<u32, (u64, u64)>;

/// True if `[addr, addr+len)` lies inside the region `lkey` of `mrs`.
pub(crate) fn in_range(mrs: &MrMap, lkey: u32, addr: u64, len: u32) -> bool {
    match mrs.get(&lkey) {
        Some(&(start, mlen)) => {
            addr >= start && addr.checked_add(u64::from(len)).is_some_and(|end| end <= start + mlen)
        }
        None => false,
    }
}

/// The registered memory of one device. Data moves while it is read-locked,
/// so a region cannot be deregistered (and freed) under a copy.
#[derive(Debug)]
pub(crate) struct MrTable {
    map: RwLock<MrMap>,
    next_key: AtomicU32,
}

impl Default for MrTable {
    fn default() -> Self {
        MrTable { map: RwLock::new(HashMap::new()), next_key: AtomicU32::new(0x100) }
    }
}

impl MrTable {
    /// The table, read-locked.
    pub fn read(&self) -> RwLockReadGuard<'_, MrMap> {
        self.map.read().unwrap_or_else(|p| p.into_inner())
    }

    /// True if `[addr, addr+len)` lies inside the region registered under `lkey`.
    pub fn check_range(&self, lkey: u32, addr: u64, len: u32) -> bool {
        in_range(&self.read(), lkey, addr, len)
    }
}

/// A registration in the memory table of its device `D`, which it keeps
/// alive; dropping it deregisters the region.
#[derive(Debug)]
pub(crate) struct Registration<D: AsRef<MrTable>> {
    dev: Arc<D>,
    pub addr: *mut u8,
    pub len: usize,
    pub lkey: u32,
}

// SAFETY: a Registration only stores the address; the caller of `register`
// promised the memory stays valid, and all accesses go through the fabric's
// checks.
unsafe impl<D: AsRef<MrTable> + Send + Sync> Send for Registration<D> {}
// SAFETY: as above; a Registration has no interior mutability of its own.
unsafe impl<D: AsRef<MrTable> + Send + Sync> Sync for Registration<D> {}

impl<D: AsRef<MrTable>> Registration<D> {
    /// Registers `len` bytes at `addr` in `dev`'s memory table.
    pub fn new(dev: Arc<D>, addr: *mut u8, len: usize) -> Result<Self, FabricError> {
        if addr.is_null() {
            return Err(FabricError::InvalidArgument("cannot register a null address".into()));
        }
        if (addr as u64).checked_add(len as u64).is_none() {
            return Err(FabricError::InvalidArgument("memory region wraps the address space".into()));
        }
        let mrs = (*dev).as_ref();
        let lkey = mrs.next_key.fetch_add(1, Ordering::Relaxed);
        mrs.map.write().unwrap_or_else(|p| p.into_inner()).insert(lkey, (addr as u64, len as u64));
        Ok(Registration { dev, addr, len, lkey })
    }
}

impl<D: AsRef<MrTable>> Drop for Registration<D> {
    fn drop(&mut self) {
        (*self.dev).as_ref().map.write().unwrap_or_else(|p| p.into_inner()).remove(&self.lkey);
    }
}

/// Checks an SRQ's size against the device's limits.
pub(crate) fn check_srq_limits(info: &DeviceInfo, max_wr: u32, max_sge: u32) -> Result<(), FabricError> {
    let (lim_wr, lim_sge) = (info.max_srq_wr, info.max_srq_sge);
    if max_wr == 0 || max_wr > lim_wr {
        return Err(FabricError::Limit { what: "max_srq_wr", requested: max_wr.into(), max: lim_wr.into() });
    }
    if max_sge == 0 || max_sge > lim_sge {
        return Err(FabricError::Limit { what: "max_srq_sge", requested: max_sge.into(), max: lim_sge.into() });
    }
    Ok(())
}

/// A receive request waiting in the SRQ.
#[derive(Debug)]
pub(crate) struct PostedRecv {
    pub wr_id: u64,
    pub sges: Vec<Sge>,
}

impl PostedRecv {
    /// Total bytes the request can take.
    pub fn capacity(&self) -> u64 {
        self.sges.iter().map(|s| u64::from(s.length)).sum()
    }
}

/// Queues `batch`'s receive requests in `wrs` (an SRQ of `max_wr` requests
/// of at most `max_sge` SGEs) up to the first one refused.
pub(crate) fn queue_recvs(
    wrs: &mut VecDeque<PostedRecv>,
    max_wr: u32,
    max_sge: u32,
    batch: &RecvBatch,
) -> Result<(), PostError> {
    for (i, wr) in batch.wrs().iter().enumerate() {
        let errno = if wr.num_sge > max_sge {
            libc::EINVAL
        } else if wrs.len() >= max_wr as usize {
            libc::ENOMEM
        } else {
            wrs.push_back(PostedRecv { wr_id: wr.wr_id, sges: batch.sges_of(wr).to_vec() });
            continue;
        };
        return Err(PostError { posted: i, error: FabricError::Verbs { call: "ibv_post_srq_recv", errno } });
    }
    Ok(())
}

/// Checks a new queue pair's capabilities against the device's limits
/// (`max_inline`: the fabric's), and that its completion queues and SRQ
/// (their devices: `parts`) belong to its device `dev`.
pub(crate) fn check_qp_create<D>(
    dev: &Arc<D>,
    caps: &QpCaps,
    max_inline: u32,
    info: &DeviceInfo,
    parts: [(&'static str, &Arc<D>); 3],
) -> Result<(), FabricError> {
    let limits = [
        ("max_send_wr", caps.max_send_wr, info.max_qp_wr),
        ("max_send_sge", caps.max_send_sge, info.max_sge),
        ("max_inline_data", caps.max_inline_data, max_inline),
    ];
    for (what, requested, max) in limits {
        if requested > max {
            return Err(FabricError::Limit { what, requested: requested.into(), max: max.into() });
        }
    }
    if caps.max_send_wr == 0 {
        return Err(FabricError::InvalidArgument("max_send_wr must be at least 1".into()));
    }
    for (what, d) in parts {
        if !Arc::ptr_eq(d, dev) {
            return Err(FabricError::InvalidArgument(format!("{what} belongs to another device")));
        }
    }
    Ok(())
}

/// The bytes of a posted message.
#[derive(Debug)]
pub(crate) enum Payload {
    /// Copied at post time.
    Inline(Vec<u8>),
    /// Gathered from registered memory when the data moves (`sim`: on
    /// delivery; `simhost`: when written into the ring).
    Gather(Vec<Sge>),
    /// Refused at post time (e.g. an SGE outside registered memory):
    /// completes with this status once the requests before it did.
    Fail(WcStatus),
}

/// Checks send request `index` of `batch` against the queue pair's `caps`
/// and free send queue slots (`sq_outstanding` in use, taking one), and
/// returns its length and payload; `registered` checks an SGE against the
/// memory table.
///
/// # Safety
/// `post_send`'s contract: every SGE's memory is readable for its length.
pub(crate) unsafe fn prepare_send(
    batch: &SendBatch,
    index: usize,
    caps: &QpCaps,
    sq_outstanding: &AtomicU32,
    registered: impl Fn(&Sge) -> bool,
) -> Result<(u64, Payload), FabricError> {
    let wr = &batch.wrs()[index];
    let einval = FabricError::Verbs { call: "ibv_post_send", errno: libc::EINVAL };
    if wr.num_sge > caps.max_send_sge {
        return Err(einval);
    }
    let sges = batch.sges_of(wr);
    let len = batch.byte_len(wr);
    let inline = wr.flags.contains(SendFlags::INLINE);
    if (inline && len > u64::from(caps.max_inline_data)) || len > u64::from(u32::MAX) {
        return Err(einval);
    }
    if sq_outstanding.load(Ordering::Acquire) >= caps.max_send_wr {
        return Err(FabricError::Verbs { call: "ibv_post_send", errno: libc::ENOMEM });
    }
    let payload = if inline {
        let mut bytes = Vec::with_capacity(len as usize);
        for s in sges {
            // SAFETY: post_send's contract: the SGE's memory is readable
            // for its length at post time (inline needs no registration).
            bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.length as usize) });
        }
        Payload::Inline(bytes)
    } else if sges.iter().all(registered) {
        Payload::Gather(sges.to_vec())
    } else {
        Payload::Fail(WcStatus::LocProtErr)
    };
    sq_outstanding.fetch_add(1, Ordering::AcqRel);
    Ok((len, payload))
}

/// The endpoint of queue pair `qpn` (initial PSN `psn`) of device `info`.
pub(crate) fn endpoint(info: &DeviceInfo, qpn: u32, psn: u32) -> QpEndpoint {
    QpEndpoint {
        qpn,
        psn,
        lid: info.lid,
        gid: info.gid,
        mtu: info.active_mtu,
        sim_addr: info.sim_addr,
        sim_network: info.sim_network,
    }
}

/// Checks that `remote` is a queue pair `connect` can reach from device
/// `info`; `no_addr` is the error of an endpoint without a device address.
pub(crate) fn check_remote(info: &DeviceInfo, remote: &QpEndpoint, no_addr: &str) -> Result<(), FabricError> {
    let ours = info.sim_network;
    if remote.sim_network != ours {
        // Another network (another process's `sim`, another directory or
        // host of `simhost`, another fabric): its queue pairs are not
        // reachable through ours, even where the numbers look alike.
        return Err(FabricError::ForeignEndpoint { ours, theirs: remote.sim_network });
    }
    if remote.sim_addr == 0 {
        return Err(FabricError::InvalidArgument(no_addr.into()));
    }
    if remote.qpn == 0 || remote.qpn > 0x00FF_FFFF {
        return Err(FabricError::InvalidArgument(format!("remote qpn {:#x} is not a valid RC QP number", remote.qpn)));
    }
    Ok(())
}
