//! `verbs`: real RDMA hardware through libibverbs (`ibverbs-sys`).
//!
//! Bring-up follows rdma-core's `rc_pingpong`: open device, query device and
//! port, protection domain, memory regions, CQs, SRQ, QP; INIT → RTR → RTS
//! with the peer's {QPN, PSN, LID, GID}. Both InfiniBand (LID routing) and
//! RoCE (GID, `is_global`) ports work; on RoCE the GID index is configurable
//! and defaults to the RoCE v2 IPv4-mapped entry.
//!
//! The hot calls (`post_send`, `post_srq_recv`, `poll_cq`) are `static
//! inline` in `verbs.h`, so they go through the context's `ops` function
//! pointers, as libibverbs' own inline wrappers do.

mod qp;
mod resources;

use std::ffi::CStr;
use std::sync::{Arc, OnceLock};

use ibverbs_sys as ffi;

pub use qp::VerbsQp;
pub use resources::{VerbsCq, VerbsMr, VerbsSrq};

use super::{DeviceInfo, Fabric, FabricConfig, FabricError, FabricKind, Gid, LinkLayer, QpCaps};

/// Names of the RDMA devices on this host (empty if there are none, also
/// when the kernel has no RDMA subsystem at all).
pub fn device_names() -> Result<Vec<String>, FabricError> {
    match DeviceList::get() {
        Ok(list) => Ok(list.iter().map(device_name).collect()),
        Err(FabricError::Verbs { errno: libc::ENOSYS, .. }) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The device list, freed on drop.
struct DeviceList {
    ptr: *mut *mut ffi::ibv_device,
    len: usize,
}

impl DeviceList {
    fn get() -> Result<DeviceList, FabricError> {
        let mut n: i32 = 0;
        // SAFETY: plain libibverbs call with a valid out-pointer.
        let ptr = unsafe { ffi::ibv_get_device_list(&mut n) };
        if ptr.is_null() {
            return Err(FabricError::last_os("ibv_get_device_list"));
        }
        Ok(DeviceList { ptr, len: n.max(0) as usize })
    }

    fn iter(&self) -> impl Iterator<Item = *mut ffi::ibv_device> + '_ {
        // SAFETY: `ptr` holds `len` valid entries until the list is freed in Drop.
        (0..self.len).map(move |i| unsafe { *self.ptr.add(i) })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from ibv_get_device_list and is freed once.
        unsafe { ffi::ibv_free_device_list(self.ptr) };
    }
}

fn device_name(dev: *mut ffi::ibv_device) -> String {
    // SAFETY: `dev` is a live entry of a device list; the name is a C string
    // owned by libibverbs.
    unsafe { CStr::from_ptr(ffi::ibv_get_device_name(dev)) }.to_string_lossy().into_owned()
}

/// The opened device context and its protection domain; destroyed last,
/// after every resource holding an `Arc` to it.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub ctx: *mut ffi::ibv_context,
    pub pd: *mut ffi::ibv_pd,
    pub info: DeviceInfo,
    /// Probed lazily: the largest accepted `max_inline_data`.
    pub max_inline: OnceLock<u32>,
    /// RC queue pairs' ACK timeout exponent and retry count (from the config).
    pub ack_timeout: u8,
    pub retry_count: u8,
}

// SAFETY: libibverbs contexts and PDs may be used from any thread.
unsafe impl Send for Ctx {}
// SAFETY: as above; libibverbs synchronises internally.
unsafe impl Sync for Ctx {}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: all resources created from the PD hold an Arc<Ctx>, so they
        // are gone; the PD and context are released exactly once.
        unsafe {
            if ffi::ibv_dealloc_pd(self.pd) != 0 {
                log::error!("ibv_dealloc_pd failed: {}", std::io::Error::last_os_error());
            }
            if ffi::ibv_close_device(self.ctx) != 0 {
                log::error!("ibv_close_device failed: {}", std::io::Error::last_os_error());
            }
        }
    }
}

/// Reusable storage for a chain of work requests (they hold raw pointers,
/// valid only during one post call).
pub(crate) struct Scratch<T>(pub Vec<T>);

impl<T> Default for Scratch<T> {
    fn default() -> Self {
        Scratch(Vec::new())
    }
}

// SAFETY: the pointers inside are rewritten before every use and only
// dereferenced by libibverbs during a post call made under the owner's lock.
unsafe impl<T> Send for Scratch<T> {}

impl<T> std::fmt::Debug for Scratch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scratch({} entries)", self.0.len())
    }
}

/// An opened libibverbs device port with its protection domain.
#[derive(Debug, Clone)]
pub struct VerbsFabric {
    ctx: Arc<Ctx>,
}

/// Bytes of an `ibv_mtu` enum value.
pub(crate) fn mtu_bytes(mtu: u32) -> u32 {
    match mtu {
        1 => 256,
        2 => 512,
        3 => 1024,
        4 => 2048,
        5 => 4096,
        _ => 0,
    }
}

/// The `ibv_mtu` enum value of a byte count (rounded down, at least 256).
pub(crate) fn mtu_enum(bytes: u32) -> u32 {
    match bytes {
        4096.. => 5,
        2048.. => 4,
        1024.. => 3,
        512.. => 2,
        _ => 1,
    }
}

/// Reads the GID type ("RoCE v2", "IB/RoCE v1") of a table entry from sysfs.
fn gid_type(dev: &str, port: u8, index: u32) -> Option<String> {
    let path = format!("/sys/class/infiniband/{dev}/ports/{port}/gid_attrs/types/{index}");
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn query_gid(ctx: *mut ffi::ibv_context, port: u8, index: u32) -> Result<Gid, FabricError> {
    let mut gid = ffi::ibv_gid::default();
    // SAFETY: `ctx` is open; `gid` is a valid out-parameter.
    let rc = unsafe { ffi::ibv_query_gid(ctx, port, index as i32, &mut gid) };
    if rc != 0 {
        return Err(FabricError::Verbs { call: "ibv_query_gid", errno: rc.abs() });
    }
    // SAFETY: ibv_gid is a union of byte array and two u64s; `raw` is always valid.
    Ok(Gid(unsafe { gid.raw }))
}

fn is_ipv4_mapped(gid: &Gid) -> bool {
    gid.0[..10].iter().all(|&b| b == 0) && gid.0[10] == 0xFF && gid.0[11] == 0xFF
}

/// Picks the GID index for RoCE: IPv4-mapped RoCE v2, else any RoCE v2,
/// else the first non-zero entry.
fn choose_gid(ctx: *mut ffi::ibv_context, dev: &str, port: u8, table_len: u32) -> Result<(u8, Gid), FabricError> {
    let mut entries = Vec::new();
    for i in 0..table_len.min(256) {
        match query_gid(ctx, port, i) {
            Ok(g) if !g.is_zero() => entries.push((i as u8, g, gid_type(dev, port, i))),
            _ => {}
        }
    }
    let v2 = |t: &Option<String>| t.as_deref().is_some_and(|t| t.eq_ignore_ascii_case("RoCE v2"));
    entries
        .iter()
        .find(|(_, g, t)| v2(t) && is_ipv4_mapped(g))
        .or_else(|| entries.iter().find(|(_, _, t)| v2(t)))
        .or_else(|| entries.first())
        .map(|(i, g, _)| (*i, *g))
        .ok_or_else(|| FabricError::BadPort {
            device: dev.into(),
            port,
            reason: "RoCE port has no GID (is the netdev up with an address?)".into(),
        })
}

impl VerbsFabric {
    fn open_device(dev: *mut ffi::ibv_device, name: &str, cfg: &FabricConfig) -> Result<VerbsFabric, FabricError> {
        // SAFETY: `dev` is a live device list entry.
        let ctx = unsafe { ffi::ibv_open_device(dev) };
        if ctx.is_null() {
            return Err(FabricError::last_os("ibv_open_device"));
        }
        // From here on, `guard` closes the context on error.
        struct Guard(*mut ffi::ibv_context);
        impl Drop for Guard {
            fn drop(&mut self) {
                if !self.0.is_null() {
                    // SAFETY: opened above and not yet handed to a Ctx.
                    unsafe { ffi::ibv_close_device(self.0) };
                }
            }
        }
        let mut guard = Guard(ctx);

        let mut dattr = ffi::ibv_device_attr::default();
        // SAFETY: `ctx` is open, `dattr` a valid out-parameter.
        let rc = unsafe { ffi::ibv_query_device(ctx, &mut dattr) };
        if rc != 0 {
            return Err(FabricError::Verbs { call: "ibv_query_device", errno: rc.abs() });
        }
        let port = cfg.port_or_default();
        if port == 0 || port > dattr.phys_port_cnt {
            return Err(FabricError::BadPort {
                device: name.into(),
                port,
                reason: format!("device has {} port(s)", dattr.phys_port_cnt),
            });
        }
        let mut pattr = ffi::ibv_port_attr::default();
        // SAFETY: the exported ibv_query_port fills the compat prefix of
        // ibv_port_attr, which our (larger, zeroed) struct contains.
        let rc = unsafe { ffi::ibv_query_port(ctx, port, (&mut pattr as *mut ffi::ibv_port_attr).cast()) };
        if rc != 0 {
            return Err(FabricError::Verbs { call: "ibv_query_port", errno: rc.abs() });
        }
        if pattr.state != ffi::ibv_port_state::IBV_PORT_ACTIVE {
            return Err(FabricError::BadPort {
                device: name.into(),
                port,
                reason: format!("port state is {} (not ACTIVE)", pattr.state),
            });
        }
        let link_layer = if u32::from(pattr.link_layer) == ffi::IBV_LINK_LAYER_ETHERNET {
            LinkLayer::Ethernet
        } else {
            LinkLayer::InfiniBand
        };
        let (gid_index, gid) = match (cfg.gid_index, link_layer) {
            (Some(i), _) => {
                if u32::from(i) >= pattr.gid_tbl_len as u32 {
                    return Err(FabricError::BadPort {
                        device: name.into(),
                        port,
                        reason: format!("gid index {i} outside the GID table of {} entries", pattr.gid_tbl_len),
                    });
                }
                (Some(i), query_gid(ctx, port, u32::from(i))?)
            }
            (None, LinkLayer::Ethernet) => {
                let (i, g) = choose_gid(ctx, name, port, pattr.gid_tbl_len as u32)?;
                (Some(i), g)
            }
            (None, _) => (None, Gid::default()),
        };
        // SAFETY: `ctx` is open.
        let pd = unsafe { ffi::ibv_alloc_pd(ctx) };
        if pd.is_null() {
            return Err(FabricError::last_os("ibv_alloc_pd"));
        }
        let nonneg = |v: i32| v.max(0) as u32;
        let info = DeviceInfo {
            name: name.into(),
            port,
            link_layer,
            lid: pattr.lid,
            gid,
            gid_index,
            active_mtu: mtu_bytes(pattr.active_mtu),
            max_qp_wr: nonneg(dattr.max_qp_wr),
            max_sge: nonneg(dattr.max_sge),
            max_srq_wr: nonneg(dattr.max_srq_wr),
            max_srq_sge: nonneg(dattr.max_srq_sge),
            max_cqe: nonneg(dattr.max_cqe),
            max_mr_size: dattr.max_mr_size,
            sim_addr: 0,
            sim_network: 0,
        };
        guard.0 = std::ptr::null_mut();
        Ok(VerbsFabric {
            ctx: Arc::new(Ctx {
                ctx,
                pd,
                info,
                max_inline: OnceLock::new(),
                ack_timeout: cfg.ack_timeout,
                retry_count: cfg.retry_count,
            }),
        })
    }

    /// The largest `max_inline_data` a queue pair of this device accepts,
    /// probed once by creating throw-away queue pairs.
    pub fn probe_max_inline(&self) -> Result<u32, FabricError> {
        qp::max_inline(&self.ctx)
    }
}

impl Fabric for VerbsFabric {
    type Mr = VerbsMr;
    type Cq = VerbsCq;
    type Srq = VerbsSrq;
    type Qp = VerbsQp;

    const KIND: FabricKind = FabricKind::Verbs;

    fn open(cfg: &FabricConfig) -> Result<Self, FabricError> {
        let list = match DeviceList::get() {
            Err(FabricError::Verbs { errno: libc::ENOSYS, .. }) => return Err(FabricError::NoDevice),
            r => r?,
        };
        let devices: Vec<_> = list.iter().map(|d| (d, device_name(d))).collect();
        if devices.is_empty() {
            return Err(FabricError::NoDevice);
        }
        let (dev, name) = match &cfg.device {
            None => devices[0].clone(),
            Some(want) => {
                devices.iter().find(|(_, n)| n == want).cloned().ok_or_else(|| FabricError::UnknownDevice {
                    name: want.clone(),
                    available: devices.iter().map(|(_, n)| n.clone()).collect(),
                })?
            }
        };
        VerbsFabric::open_device(dev, &name, cfg)
    }

    fn info(&self) -> &DeviceInfo {
        &self.ctx.info
    }

    fn max_inline_data(&self) -> u32 {
        self.probe_max_inline().unwrap_or_else(|e| {
            log::warn!("probing max_inline_data on {} failed ({e}); not sending inline", self.ctx.info.name);
            0
        })
    }

    unsafe fn register(&self, addr: *mut u8, len: usize) -> Result<VerbsMr, FabricError> {
        // SAFETY: forwarded contract.
        unsafe { VerbsMr::new(self.ctx.clone(), addr, len) }
    }

    fn create_cq(&self, cqe: u32) -> Result<VerbsCq, FabricError> {
        VerbsCq::new(self.ctx.clone(), cqe)
    }

    fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<VerbsSrq, FabricError> {
        VerbsSrq::new(self.ctx.clone(), max_wr, max_sge)
    }

    fn create_qp(
        &self,
        send_cq: &VerbsCq,
        recv_cq: &VerbsCq,
        srq: &VerbsSrq,
        caps: QpCaps,
    ) -> Result<VerbsQp, FabricError> {
        VerbsQp::new(self.ctx.clone(), send_cq, recv_cq, srq, caps)
    }
}
