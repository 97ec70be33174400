//! libibverbs RC queue pairs: creation with inline probing, the explicit
//! INIT → RTR → RTS bring-up, and chained sends.

use std::sync::{Arc, Mutex};

use ibverbs_sys as ffi;

use super::resources::{CqHandle, SrqHandle, VerbsCq, VerbsSrq};
use super::{mtu_enum, Ctx, Scratch};
use crate::fabric::{FabricError, LinkLayer, PostError, QpCaps, QpEndpoint, QpState, QueuePair, SendBatch, SendFlags};
use crate::util::lock;

/// 7 = retry forever on receiver-not-ready: an empty SRQ never loses data.
const RNR_RETRY: u8 = 7;
/// 12 = 0.64 ms minimal RNR NAK timer.
const MIN_RNR_TIMER: u8 = 12;

/// Creates an RC QP; returns it with the capabilities the provider granted.
fn create_raw(
    ctx: &Ctx,
    send_cq: *mut ffi::ibv_cq,
    recv_cq: *mut ffi::ibv_cq,
    srq: *mut ffi::ibv_srq,
    caps: QpCaps,
) -> Result<(*mut ffi::ibv_qp, QpCaps), FabricError> {
    let mut attr = ffi::ibv_qp_init_attr {
        send_cq,
        recv_cq,
        srq,
        qp_type: ffi::ibv_qp_type::IBV_QPT_RC,
        sq_sig_all: 0,
        ..Default::default()
    };
    attr.cap.max_send_wr = caps.max_send_wr;
    attr.cap.max_send_sge = caps.max_send_sge;
    attr.cap.max_inline_data = caps.max_inline_data;
    // SAFETY: the PD and the CQs/SRQ are alive; `attr` is fully initialised.
    let qp = unsafe { ffi::ibv_create_qp(ctx.pd, &mut attr) };
    if qp.is_null() {
        return Err(FabricError::last_os("ibv_create_qp"));
    }
    let granted = QpCaps {
        max_send_wr: attr.cap.max_send_wr,
        max_send_sge: attr.cap.max_send_sge,
        max_inline_data: attr.cap.max_inline_data,
    };
    Ok((qp, granted))
}

/// The largest `max_inline_data` the device accepts (binary search with
/// throw-away QPs on a throw-away CQ; cached in the context).
pub(crate) fn max_inline(ctx: &Arc<Ctx>) -> Result<u32, FabricError> {
    if let Some(v) = ctx.max_inline.get() {
        return Ok(*v);
    }
    let cq = VerbsCq::new(ctx.clone(), 1)?;
    let srq = VerbsSrq::new(ctx.clone(), 1, 1)?;
    let fits = |inline: u32| {
        let caps = QpCaps { max_send_wr: 1, max_send_sge: 1, max_inline_data: inline };
        match create_raw(ctx, cq.0.cq, cq.0.cq, srq.handle.srq, caps) {
            Ok((qp, _)) => {
                // SAFETY: created just above, destroyed once.
                unsafe { ffi::ibv_destroy_qp(qp) };
                true
            }
            Err(_) => false,
        }
    };
    let (mut lo, mut hi) = (0u32, 1u32 << 16);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Ok(*ctx.max_inline.get_or_init(|| lo))
}

/// A libibverbs RC queue pair.
#[derive(Debug)]
pub struct VerbsQp {
    ctx: Arc<Ctx>,
    qp: *mut ffi::ibv_qp,
    _send_cq: Arc<CqHandle>,
    _recv_cq: Arc<CqHandle>,
    _srq: Arc<SrqHandle>,
    caps: QpCaps,
    psn: u32,
    scratch: Mutex<Scratch<ffi::ibv_send_wr>>,
}

// SAFETY: ibv_qp may be posted to and modified from any thread (the provider
// locks); the scratch chain is behind a mutex.
unsafe impl Send for VerbsQp {}
// SAFETY: as above.
unsafe impl Sync for VerbsQp {}

impl VerbsQp {
    pub(crate) fn new(
        ctx: Arc<Ctx>,
        send_cq: &VerbsCq,
        recv_cq: &VerbsCq,
        srq: &VerbsSrq,
        caps: QpCaps,
    ) -> Result<VerbsQp, FabricError> {
        let info = &ctx.info;
        for (what, requested, max) in
            [("max_send_wr", caps.max_send_wr, info.max_qp_wr), ("max_send_sge", caps.max_send_sge, info.max_sge)]
        {
            if requested > max {
                return Err(FabricError::Limit { what, requested: requested.into(), max: max.into() });
            }
        }
        if caps.max_send_wr == 0 {
            return Err(FabricError::InvalidArgument("max_send_wr must be at least 1".into()));
        }
        for (what, c) in [("send cq", &send_cq.0.ctx), ("recv cq", &recv_cq.0.ctx)] {
            if !Arc::ptr_eq(c, &ctx) {
                return Err(FabricError::InvalidArgument(format!("{what} belongs to another device context")));
            }
        }
        let (qp, granted) = match create_raw(&ctx, send_cq.0.cq, recv_cq.0.cq, srq.handle.srq, caps) {
            Ok(v) => v,
            Err(e) if caps.max_inline_data > 0 => {
                // Tell the caller what the device would have accepted.
                let max = max_inline(&ctx)?;
                if caps.max_inline_data > max {
                    return Err(FabricError::Limit {
                        what: "max_inline_data",
                        requested: caps.max_inline_data.into(),
                        max: max.into(),
                    });
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        Ok(VerbsQp {
            ctx,
            qp,
            _send_cq: send_cq.0.clone(),
            _recv_cq: recv_cq.0.clone(),
            _srq: srq.handle.clone(),
            caps: granted,
            psn: crate::util::random_u32() & 0x00FF_FFFF,
            scratch: Mutex::new(Scratch::default()),
        })
    }

    fn modify(&self, attr: &mut ffi::ibv_qp_attr, mask: ffi::ibv_qp_attr_mask, step: &str) -> Result<(), FabricError> {
        // SAFETY: `qp` is live; `attr` is initialised for every bit in `mask`.
        let rc = unsafe { ffi::ibv_modify_qp(self.qp, attr, mask.0 as i32) };
        if rc != 0 {
            log::debug!("ibv_modify_qp to {step} failed: errno {rc}");
            return Err(FabricError::Verbs { call: "ibv_modify_qp", errno: rc.abs() });
        }
        Ok(())
    }
}

impl QueuePair for VerbsQp {
    fn qp_num(&self) -> u32 {
        // SAFETY: `qp` is live.
        unsafe { (*self.qp).qp_num }
    }

    fn endpoint(&self) -> QpEndpoint {
        let info = &self.ctx.info;
        QpEndpoint {
            qpn: self.qp_num(),
            psn: self.psn,
            lid: info.lid,
            gid: info.gid,
            mtu: info.active_mtu,
            sim_addr: 0,
            sim_network: 0,
        }
    }

    fn caps(&self) -> QpCaps {
        self.caps
    }

    fn state(&self) -> QpState {
        let mut attr = ffi::ibv_qp_attr::default();
        let mut init = ffi::ibv_qp_init_attr::default();
        // SAFETY: `qp` is live; both out-parameters are valid.
        let rc =
            unsafe { ffi::ibv_query_qp(self.qp, &mut attr, ffi::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32, &mut init) };
        if rc != 0 {
            return QpState::Other;
        }
        use ffi::ibv_qp_state::*;
        match attr.qp_state {
            IBV_QPS_RESET => QpState::Reset,
            IBV_QPS_INIT => QpState::Init,
            IBV_QPS_RTR => QpState::Rtr,
            IBV_QPS_RTS => QpState::Rts,
            IBV_QPS_ERR => QpState::Error,
            _ => QpState::Other,
        }
    }

    fn connect(&self, remote: &QpEndpoint) -> Result<(), FabricError> {
        use ffi::ibv_qp_attr_mask as m;
        let info = &self.ctx.info;
        if remote.sim_network != 0 {
            return Err(FabricError::ForeignEndpoint { ours: 0, theirs: remote.sim_network });
        }
        if remote.qpn == 0 || remote.qpn > 0x00FF_FFFF {
            return Err(FabricError::InvalidArgument(format!(
                "remote qpn {:#x} is not a valid RC QP number",
                remote.qpn
            )));
        }
        let global = info.link_layer == LinkLayer::Ethernet || info.gid_index.is_some();
        if global && remote.gid.is_zero() {
            return Err(FabricError::InvalidArgument("RoCE needs the remote GID, which is zero".into()));
        }
        if !global && remote.lid == 0 {
            return Err(FabricError::InvalidArgument("InfiniBand needs the remote LID, which is 0".into()));
        }
        // RESET → INIT
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: info.port,
            qp_access_flags: ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0,
            ..Default::default()
        };
        self.modify(&mut a, m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS, "INIT")?;
        // INIT → RTR
        let mtu = if remote.mtu == 0 { info.active_mtu } else { info.active_mtu.min(remote.mtu) };
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state::IBV_QPS_RTR,
            path_mtu: mtu_enum(mtu),
            dest_qp_num: remote.qpn,
            rq_psn: remote.psn & 0x00FF_FFFF,
            max_dest_rd_atomic: 1,
            min_rnr_timer: MIN_RNR_TIMER,
            ..Default::default()
        };
        a.ah_attr.dlid = remote.lid;
        a.ah_attr.sl = 0;
        a.ah_attr.src_path_bits = 0;
        a.ah_attr.port_num = info.port;
        if global {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid.raw = remote.gid.0;
            a.ah_attr.grh.sgid_index = info.gid_index.unwrap_or(0);
            a.ah_attr.grh.hop_limit = 64;
        }
        self.modify(
            &mut a,
            m::IBV_QP_STATE
                | m::IBV_QP_AV
                | m::IBV_QP_PATH_MTU
                | m::IBV_QP_DEST_QPN
                | m::IBV_QP_RQ_PSN
                | m::IBV_QP_MAX_DEST_RD_ATOMIC
                | m::IBV_QP_MIN_RNR_TIMER,
            "RTR",
        )?;
        // RTR → RTS
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state::IBV_QPS_RTS,
            timeout: self.ctx.ack_timeout,
            retry_cnt: self.ctx.retry_count,
            rnr_retry: RNR_RETRY,
            sq_psn: self.psn,
            max_rd_atomic: 1,
            ..Default::default()
        };
        self.modify(
            &mut a,
            m::IBV_QP_STATE
                | m::IBV_QP_TIMEOUT
                | m::IBV_QP_RETRY_CNT
                | m::IBV_QP_RNR_RETRY
                | m::IBV_QP_SQ_PSN
                | m::IBV_QP_MAX_QP_RD_ATOMIC,
            "RTS",
        )
    }

    fn set_error(&self) -> Result<(), FabricError> {
        let mut a = ffi::ibv_qp_attr { qp_state: ffi::ibv_qp_state::IBV_QPS_ERR, ..Default::default() };
        self.modify(&mut a, ffi::ibv_qp_attr_mask::IBV_QP_STATE, "ERR")
    }

    unsafe fn post_send(&self, batch: &SendBatch) -> Result<(), PostError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut guard = lock(&self.scratch);
        let wrs = &mut guard.0;
        wrs.clear();
        for wr in batch.wrs() {
            let sges = batch.sges_of(wr);
            let mut flags = 0;
            if wr.flags.contains(SendFlags::SIGNALED) {
                flags |= ffi::ibv_send_flags::IBV_SEND_SIGNALED.0;
            }
            if wr.flags.contains(SendFlags::INLINE) {
                flags |= ffi::ibv_send_flags::IBV_SEND_INLINE.0;
            }
            let mut w = ffi::ibv_send_wr {
                wr_id: wr.wr_id,
                // Same layout (checked in resources.rs); libibverbs only reads it.
                sg_list: sges.as_ptr().cast_mut().cast(),
                num_sge: wr.num_sge as i32,
                opcode: if wr.imm.is_some() {
                    ffi::ibv_wr_opcode::IBV_WR_SEND_WITH_IMM
                } else {
                    ffi::ibv_wr_opcode::IBV_WR_SEND
                },
                send_flags: flags,
                ..Default::default()
            };
            // Immediate data travels in network byte order.
            w.__bindgen_anon_1.imm_data = wr.imm.unwrap_or(0).to_be();
            wrs.push(w);
        }
        let base = wrs.as_mut_ptr();
        for i in 0..wrs.len() - 1 {
            // SAFETY: i + 1 < len, so both pointers are inside `wrs`.
            wrs[i].next = unsafe { base.add(i + 1) };
        }
        let mut bad: *mut ffi::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: `qp` is live; the chain and its SGE lists stay valid for
        // the call; the caller vouched for the buffers (post_send contract).
        let rc = unsafe {
            let post = (*(*self.qp).context).ops.post_send.expect("provider without post_send");
            post(self.qp, base, &mut bad)
        };
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: on failure `bad` points into our chain.
        let posted = if bad.is_null() { 0 } else { unsafe { bad.offset_from(base) }.max(0) as usize };
        Err(PostError { posted, error: FabricError::Verbs { call: "ibv_post_send", errno: rc.abs() } })
    }
}

impl Drop for VerbsQp {
    fn drop(&mut self) {
        // SAFETY: `qp` is live and destroyed once, before its CQs/SRQ (held by Arcs).
        let rc = unsafe { ffi::ibv_destroy_qp(self.qp) };
        if rc != 0 {
            log::error!("ibv_destroy_qp failed: errno {rc}");
        }
    }
}
