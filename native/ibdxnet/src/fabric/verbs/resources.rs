//! libibverbs memory regions, completion queues and shared receive queues.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use ibverbs_sys as ffi;

use super::{Ctx, Scratch};
use crate::fabric::{
    CompletionQueue, FabricError, MemoryRegion, PostError, RecvBatch, Sge, SharedReceiveQueue, WcOpcode, WcStatus,
    WorkCompletion,
};

// Our SGE is handed to libibverbs as is.
const _: () = assert!(std::mem::size_of::<Sge>() == std::mem::size_of::<ffi::ibv_sge>());
const _: () = assert!(std::mem::offset_of!(Sge, addr) == std::mem::offset_of!(ffi::ibv_sge, addr));
const _: () = assert!(std::mem::offset_of!(Sge, length) == std::mem::offset_of!(ffi::ibv_sge, length));
const _: () = assert!(std::mem::offset_of!(Sge, lkey) == std::mem::offset_of!(ffi::ibv_sge, lkey));

/// A libibverbs memory registration (local write access).
#[derive(Debug)]
pub struct VerbsMr {
    _ctx: Arc<Ctx>,
    mr: *mut ffi::ibv_mr,
    addr: *mut u8,
    len: usize,
    lkey: u32,
}

// SAFETY: an ibv_mr handle may be used and deregistered from any thread.
unsafe impl Send for VerbsMr {}
// SAFETY: VerbsMr is immutable after creation.
unsafe impl Sync for VerbsMr {}

impl VerbsMr {
    /// # Safety
    /// See [`crate::fabric::Fabric::register`].
    pub(crate) unsafe fn new(ctx: Arc<Ctx>, addr: *mut u8, len: usize) -> Result<VerbsMr, FabricError> {
        if addr.is_null() {
            return Err(FabricError::InvalidArgument("cannot register a null address".into()));
        }
        if len as u64 > ctx.info.max_mr_size {
            return Err(FabricError::Limit {
                what: "memory region size",
                requested: len as u64,
                max: ctx.info.max_mr_size,
            });
        }
        let access = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32;
        // SAFETY: the PD is alive (held by `ctx`); the caller vouches for the memory.
        let mr = unsafe { ffi::ibv_reg_mr(ctx.pd, addr.cast(), len, access) };
        if mr.is_null() {
            return Err(FabricError::last_os("ibv_reg_mr"));
        }
        // SAFETY: `mr` was just returned non-null by ibv_reg_mr.
        let lkey = unsafe { (*mr).lkey };
        Ok(VerbsMr { _ctx: ctx, mr, addr, len, lkey })
    }
}

impl MemoryRegion for VerbsMr {
    fn addr(&self) -> *mut u8 {
        self.addr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn lkey(&self) -> u32 {
        self.lkey
    }
}

impl Drop for VerbsMr {
    fn drop(&mut self) {
        // SAFETY: `mr` is live and deregistered once.
        let rc = unsafe { ffi::ibv_dereg_mr(self.mr) };
        if rc != 0 {
            log::error!("ibv_dereg_mr failed: errno {rc}");
        }
    }
}

/// Set through the CQ's `cq_context` when the device reports an async CQ error.
#[derive(Debug, Default)]
pub(crate) struct CqFlags {
    overrun: AtomicBool,
}

/// The owned `ibv_cq`.
#[derive(Debug)]
pub(crate) struct CqHandle {
    pub ctx: Arc<Ctx>,
    pub cq: *mut ffi::ibv_cq,
    /// The CQ's own completion channel (its fd is non-blocking).
    channel: *mut ffi::ibv_comp_channel,
    capacity: u32,
    flags: Box<CqFlags>,
    empty_polls: AtomicU32,
}

// SAFETY: ibv_cq may be polled from any thread (the provider locks).
unsafe impl Send for CqHandle {}
// SAFETY: as above.
unsafe impl Sync for CqHandle {}

impl Drop for CqHandle {
    fn drop(&mut self) {
        // SAFETY: every QP using this CQ holds an Arc to this handle, so none is
        // left; every CQ event was acked in `clear_wake`.
        let rc = unsafe { ffi::ibv_destroy_cq(self.cq) };
        if rc != 0 {
            log::error!("ibv_destroy_cq failed: errno {rc}");
        }
        // SAFETY: the channel's only CQ is gone.
        let rc = unsafe { ffi::ibv_destroy_comp_channel(self.channel) };
        if rc != 0 {
            log::error!("ibv_destroy_comp_channel failed: errno {rc}");
        }
    }
}

/// A libibverbs completion queue.
#[derive(Debug, Clone)]
pub struct VerbsCq(pub(crate) Arc<CqHandle>);

impl VerbsCq {
    pub(crate) fn new(ctx: Arc<Ctx>, cqe: u32) -> Result<VerbsCq, FabricError> {
        let max = ctx.info.max_cqe;
        if cqe == 0 || cqe > max {
            return Err(FabricError::Limit { what: "cqe", requested: cqe.into(), max: max.into() });
        }
        let flags = Box::<CqFlags>::default();
        let cq_context = (&*flags as *const CqFlags).cast_mut().cast();
        // SAFETY: the context is open.
        let channel = unsafe { ffi::ibv_create_comp_channel(ctx.ctx) };
        if channel.is_null() {
            return Err(FabricError::last_os("ibv_create_comp_channel"));
        }
        let destroy_channel = || {
            // SAFETY: no CQ uses the channel.
            unsafe { ffi::ibv_destroy_comp_channel(channel) };
        };
        // SAFETY: the channel is live; its fd belongs to it. Non-blocking, so
        // `clear_wake` can read events until there are none.
        let rc = unsafe {
            let fd = (*channel).fd;
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK)
        };
        if rc < 0 {
            let e = FabricError::last_os("fcntl(comp_channel, O_NONBLOCK)");
            destroy_channel();
            return Err(e);
        }
        // SAFETY: the context and channel are open; `flags` outlives the CQ (dropped after it).
        let cq = unsafe { ffi::ibv_create_cq(ctx.ctx, cqe as i32, cq_context, channel, 0) };
        if cq.is_null() {
            let e = FabricError::last_os("ibv_create_cq");
            destroy_channel();
            return Err(e);
        }
        // SAFETY: `cq` is live; the provider may round the size up.
        let capacity = unsafe { (*cq).cqe }.max(0) as u32;
        Ok(VerbsCq(Arc::new(CqHandle { ctx, cq, channel, capacity, flags, empty_polls: AtomicU32::new(0) })))
    }
}

/// Reads pending async events of `ctx` without blocking; marks overrun CQs.
fn drain_async_events(ctx: &Ctx) {
    // SAFETY: `ctx.ctx` is open; async_fd is an fd owned by libibverbs.
    let fd = unsafe { (*ctx.ctx).async_fd };
    loop {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: valid pollfd array of length 1, zero timeout.
        if unsafe { libc::poll(&mut pfd, 1, 0) } <= 0 {
            return;
        }
        let mut ev = ffi::ibv_async_event::default();
        // SAFETY: the fd is readable, so this does not block.
        if unsafe { ffi::ibv_get_async_event(ctx.ctx, &mut ev) } != 0 {
            return;
        }
        if ev.event_type == ffi::IBV_EVENT_CQ_ERR {
            // SAFETY: for CQ events the element is the CQ, whose context is
            // the CqFlags we registered (alive while the CQ is).
            unsafe {
                let flags = (*ev.element.cq).cq_context as *const CqFlags;
                (*flags).overrun.store(true, Ordering::Release);
            }
        } else {
            log::warn!("libibverbs async event {} on {}", ev.event_type, ctx.info.name);
        }
        // SAFETY: every event got from ibv_get_async_event must be acked once.
        unsafe { ffi::ibv_ack_async_event(&mut ev) };
    }
}

const POLL_CHUNK: usize = 32;
/// Async events are checked after this many polls that found nothing new.
const ASYNC_CHECK_EVERY: u32 = 256;

impl CompletionQueue for VerbsCq {
    fn capacity(&self) -> u32 {
        self.0.capacity
    }

    fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize, FabricError> {
        let h = &self.0;
        if h.flags.overrun.load(Ordering::Acquire) {
            return Err(FabricError::CqOverrun);
        }
        let mut buf = [ffi::ibv_wc::default(); POLL_CHUNK];
        // SAFETY: `cq` is live; ops.poll_cq is the provider's implementation.
        let poll_cq = unsafe { (*(*h.cq).context).ops.poll_cq }.expect("provider without poll_cq");
        let mut n = 0;
        while n < out.len() {
            let want = (out.len() - n).min(POLL_CHUNK);
            // SAFETY: `buf` has room for `want` completions.
            let got = unsafe { poll_cq(h.cq, want as i32, buf.as_mut_ptr()) };
            if got < 0 {
                return Err(FabricError::Verbs { call: "ibv_poll_cq", errno: got.abs() });
            }
            for wc in &buf[..got as usize] {
                out[n] = convert_wc(wc);
                n += 1;
            }
            if (got as usize) < want {
                break;
            }
        }
        if n == 0 && h.empty_polls.fetch_add(1, Ordering::Relaxed) % ASYNC_CHECK_EVERY == 0 {
            drain_async_events(&h.ctx);
            if h.flags.overrun.load(Ordering::Acquire) {
                return Err(FabricError::CqOverrun);
            }
        }
        Ok(n)
    }

    fn arm(&self) -> Result<bool, FabricError> {
        let h = &self.0;
        // SAFETY: `cq` is live; ops.req_notify_cq is the provider's
        // implementation of the inline ibv_req_notify_cq.
        let rc = unsafe {
            let notify = (*(*h.cq).context).ops.req_notify_cq.expect("provider without req_notify_cq");
            notify(h.cq, 0)
        };
        if rc != 0 {
            return Err(FabricError::Verbs { call: "ibv_req_notify_cq", errno: rc });
        }
        Ok(true)
    }

    fn wake_fd(&self) -> std::os::fd::RawFd {
        // SAFETY: the channel lives as long as the handle.
        unsafe { (*self.0.channel).fd }
    }

    fn clear_wake(&self) -> Result<(), FabricError> {
        let h = &self.0;
        let mut events = 0u32;
        loop {
            let mut cq = std::ptr::null_mut();
            let mut context = std::ptr::null_mut();
            // SAFETY: the channel is live and non-blocking: with no event
            // left this returns -1 (EAGAIN) instead of waiting.
            if unsafe { ffi::ibv_get_cq_event(h.channel, &mut cq, &mut context) } != 0 {
                break;
            }
            events += 1;
        }
        if events > 0 {
            // SAFETY: `events` events of this (the channel's only) CQ were got above.
            unsafe { ffi::ibv_ack_cq_events(h.cq, events) };
        }
        Ok(())
    }
}

fn convert_wc(wc: &ffi::ibv_wc) -> WorkCompletion {
    let (status, vendor_err) = match wc.error() {
        None => (WcStatus::Success, 0),
        Some((s, v)) => (WcStatus::from_raw(s), v),
    };
    let opcode = match wc.opcode() {
        ffi::ibv_wc_opcode::IBV_WC_SEND => WcOpcode::Send,
        ffi::ibv_wc_opcode::IBV_WC_RECV => WcOpcode::Recv,
        o => WcOpcode::Other(o),
    };
    WorkCompletion {
        wr_id: wc.wr_id(),
        status,
        opcode,
        byte_len: wc.len() as u32,
        // Immediate data travels in network byte order.
        imm_data: wc.imm_data().map(u32::from_be),
        qp_num: wc.qp_num,
        vendor_err,
    }
}

/// The owned `ibv_srq`.
#[derive(Debug)]
pub(crate) struct SrqHandle {
    _ctx: Arc<Ctx>,
    pub srq: *mut ffi::ibv_srq,
}

// SAFETY: an SRQ may be posted to from any thread (the provider locks).
unsafe impl Send for SrqHandle {}
// SAFETY: as above.
unsafe impl Sync for SrqHandle {}

impl Drop for SrqHandle {
    fn drop(&mut self) {
        // SAFETY: every QP using this SRQ holds an Arc to this handle, so none is left.
        let rc = unsafe { ffi::ibv_destroy_srq(self.srq) };
        if rc != 0 {
            log::error!("ibv_destroy_srq failed: errno {rc}");
        }
    }
}

/// A libibverbs shared receive queue.
#[derive(Debug, Clone)]
pub struct VerbsSrq {
    pub(crate) handle: Arc<SrqHandle>,
    max_wr: u32,
    max_sge: u32,
    scratch: Arc<Mutex<Scratch<ffi::ibv_recv_wr>>>,
}

impl VerbsSrq {
    pub(crate) fn new(ctx: Arc<Ctx>, max_wr: u32, max_sge: u32) -> Result<VerbsSrq, FabricError> {
        let (lim_wr, lim_sge) = (ctx.info.max_srq_wr, ctx.info.max_srq_sge);
        if max_wr == 0 || max_wr > lim_wr {
            return Err(FabricError::Limit { what: "max_srq_wr", requested: max_wr.into(), max: lim_wr.into() });
        }
        if max_sge == 0 || max_sge > lim_sge {
            return Err(FabricError::Limit { what: "max_srq_sge", requested: max_sge.into(), max: lim_sge.into() });
        }
        let mut attr = ffi::ibv_srq_init_attr::default();
        attr.attr.max_wr = max_wr;
        attr.attr.max_sge = max_sge;
        // SAFETY: the PD is alive; `attr` is valid; the provider writes back the real sizes.
        let srq = unsafe { ffi::ibv_create_srq(ctx.pd, &mut attr) };
        if srq.is_null() {
            return Err(FabricError::last_os("ibv_create_srq"));
        }
        Ok(VerbsSrq {
            handle: Arc::new(SrqHandle { _ctx: ctx, srq }),
            max_wr,
            max_sge,
            scratch: Arc::new(Mutex::new(Scratch::default())),
        })
    }
}

impl SharedReceiveQueue for VerbsSrq {
    fn max_wr(&self) -> u32 {
        self.max_wr
    }

    fn max_sge(&self) -> u32 {
        self.max_sge
    }

    unsafe fn post_recv(&self, batch: &RecvBatch) -> Result<(), PostError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut guard = crate::util::lock(&self.scratch);
        let wrs = &mut guard.0;
        wrs.clear();
        for wr in batch.wrs() {
            let sges = batch.sges_of(wr);
            wrs.push(ffi::ibv_recv_wr {
                wr_id: wr.wr_id,
                next: std::ptr::null_mut(),
                // Same layout (checked above); libibverbs only reads it.
                sg_list: sges.as_ptr().cast_mut().cast(),
                num_sge: wr.num_sge as i32,
            });
        }
        let base = wrs.as_mut_ptr();
        for i in 0..wrs.len() - 1 {
            // SAFETY: i + 1 < len, so both pointers are inside `wrs`.
            wrs[i].next = unsafe { base.add(i + 1) };
        }
        let mut bad: *mut ffi::ibv_recv_wr = std::ptr::null_mut();
        let srq = self.handle.srq;
        // SAFETY: `srq` is live; the chain and its SGE lists stay valid for
        // the call; the caller vouched for the buffers (post_recv contract).
        let rc = unsafe {
            let post = (*(*srq).context).ops.post_srq_recv.expect("provider without post_srq_recv");
            post(srq, base, &mut bad)
        };
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: on failure `bad` points into our chain.
        let posted = if bad.is_null() { 0 } else { unsafe { bad.offset_from(base) }.max(0) as usize };
        Err(PostError { posted, error: FabricError::Verbs { call: "ibv_post_srq_recv", errno: rc.abs() } })
    }
}
