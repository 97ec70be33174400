//! Simulated RC queue pairs and message delivery.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use super::queues::{CqCore, CqEntry, SimCq, SimSrq, SrqCore};
use super::{with_mrs, SimDevice, LINK_RETRY_INTERVAL};
use crate::fabric::simparts::{check_qp_create, check_remote, endpoint, in_range, prepare_send, Payload, PostedRecv};
use crate::fabric::{
    FabricError, PostError, QpCaps, QpEndpoint, QpState, QueuePair, SendBatch, SendFlags, Sge, WcOpcode, WcStatus,
    WorkCompletion,
};
use crate::util::lock;

const ST_RESET: u8 = 0;
const ST_RTS: u8 = 3;
const ST_ERROR: u8 = 4;

#[derive(Debug)]
struct Msg {
    wr_id: u64,
    signaled: bool,
    imm: Option<u32>,
    len: u64,
    payload: Payload,
    ready_at: Option<Instant>,
}

#[derive(Debug, Default)]
struct TxState {
    remote: Option<(u64, u32)>,
    peer: Weak<QpCore>,
    queue: VecDeque<Msg>,
    /// Successful unsignalled requests whose slots the next completion frees.
    unsignaled: u32,
    timer_armed: bool,
    /// Since when the head message waits for a cut link (retry budget).
    cut_since: Option<Instant>,
}

/// The shared part of a simulated queue pair.
#[derive(Debug)]
pub(crate) struct QpCore {
    me: Weak<QpCore>,
    dev: Arc<SimDevice>,
    qpn: u32,
    psn: u32,
    caps: QpCaps,
    send_cq: Arc<CqCore>,
    recv_cq: Arc<CqCore>,
    srq: Arc<SrqCore>,
    state: AtomicU8,
    destroyed: AtomicBool,
    /// In its peer's SRQ's `waiters`; read and written under that SRQ's lock
    /// only (atomic for `Sync`).
    pub rnr_waiting: AtomicBool,
    /// Send queue slots in use (posted, completion not yet polled).
    pub sq_outstanding: AtomicU32,
    tx: Mutex<TxState>,
}

impl QpCore {
    fn state(&self) -> QpState {
        match self.state.load(Ordering::Acquire) {
            ST_RESET => QpState::Reset,
            ST_RTS => QpState::Rts,
            ST_ERROR => QpState::Error,
            _ => QpState::Other,
        }
    }

    fn alive_and_connected(&self) -> bool {
        !self.destroyed.load(Ordering::Acquire) && self.state.load(Ordering::Acquire) == ST_RTS
    }

    pub fn timer_fired(&self) {
        lock(&self.tx).timer_armed = false;
    }

    fn arm_timer(&self, tx: &mut TxState, at: Instant) {
        if !tx.timer_armed {
            tx.timer_armed = true;
            self.dev.net.arm_timer(at, self.me.clone());
        }
    }

    /// Queues a send completion for `msg`, freeing its slot and those of the
    /// unsignalled requests before it when polled.
    fn complete(&self, tx: &mut TxState, msg: &Msg, status: WcStatus) {
        let slots = tx.unsignaled + 1;
        tx.unsignaled = 0;
        let wc = WorkCompletion {
            wr_id: msg.wr_id,
            status,
            opcode: WcOpcode::Send,
            byte_len: 0,
            imm_data: None,
            qp_num: self.qpn,
            vendor_err: 0,
        };
        self.send_cq.push(CqEntry { wc, release: Some((self.me.clone(), slots)) });
    }

    /// Fails the head message with `status`, moves to ERROR and flushes the rest.
    fn fail_head(&self, tx: &mut TxState, status: WcStatus) {
        if let Some(msg) = tx.queue.pop_front() {
            self.complete(tx, &msg, status);
        }
        self.state.store(ST_ERROR, Ordering::Release);
        self.flush(tx);
    }

    fn flush(&self, tx: &mut TxState) {
        while let Some(msg) = tx.queue.pop_front() {
            self.complete(tx, &msg, WcStatus::WrFlushErr);
        }
    }

    fn resolve_peer(&self, tx: &mut TxState) -> Option<Arc<QpCore>> {
        if let Some(p) = tx.peer.upgrade() {
            return Some(p);
        }
        let (addr, qpn) = tx.remote?;
        let peer = self.dev.net.device(addr)?.qp(qpn)?;
        tx.peer = Arc::downgrade(&peer);
        Some(peer)
    }

    /// Delivers queued messages in order until one has to wait or fails.
    pub fn pump(&self) {
        let mut peer_failed: Option<Arc<QpCore>> = None;
        {
            let mut tx = lock(&self.tx);
            while let Some(head) = tx.queue.front() {
                if self.state.load(Ordering::Acquire) == ST_ERROR {
                    self.flush(&mut tx);
                    break;
                }
                if let Payload::Fail(status) = head.payload {
                    self.fail_head(&mut tx, status);
                    break;
                }
                if let Some(at) = head.ready_at {
                    if at > Instant::now() {
                        self.arm_timer(&mut tx, at);
                        break;
                    }
                }
                let peer = match self.resolve_peer(&mut tx) {
                    Some(p) if p.alive_and_connected() => p,
                    _ => {
                        self.fail_head(&mut tx, WcStatus::RetryExcErr);
                        break;
                    }
                };
                if peer.dev.link_down() || self.dev.link_down() {
                    // The transport retries the head message until the link
                    // is back or the network's retry budget is spent.
                    let now = Instant::now();
                    let since = *tx.cut_since.get_or_insert(now);
                    let deadline = since + self.dev.net.retry_budget();
                    if now >= deadline {
                        tx.cut_since = None;
                        self.fail_head(&mut tx, WcStatus::RetryExcErr);
                    } else {
                        self.arm_timer(&mut tx, deadline.min(now + LINK_RETRY_INTERVAL));
                    }
                    break;
                }
                tx.cut_since = None;
                let Some(recv) = self.take_recv(&mut tx, &peer) else { break };
                let Some(msg) = tx.queue.pop_front() else { break };
                match deliver(&self.dev, &msg, recv, &peer) {
                    Ok(()) if msg.signaled => self.complete(&mut tx, &msg, WcStatus::Success),
                    Ok(()) => tx.unsignaled += 1,
                    Err(DeliveryError::Local(recv)) => {
                        lock(&peer.srq.state).wrs.push_front(recv);
                        tx.queue.push_front(msg);
                        self.fail_head(&mut tx, WcStatus::LocProtErr);
                        break;
                    }
                    Err(DeliveryError::Remote(status)) => {
                        self.complete(&mut tx, &msg, status);
                        self.state.store(ST_ERROR, Ordering::Release);
                        self.flush(&mut tx);
                        peer_failed = Some(peer);
                        break;
                    }
                }
            }
        }
        // The receiver's QP fails too; done outside our lock (lock order).
        if let Some(peer) = peer_failed {
            peer.state.store(ST_ERROR, Ordering::Release);
            peer.pump();
        }
    }

    /// Takes the peer's next receive request, or registers as waiting
    /// (receiver not ready) and arms a retry timer.
    fn take_recv(&self, tx: &mut TxState, peer: &QpCore) -> Option<PostedRecv> {
        let mut srq = lock(&peer.srq.state);
        if let Some(r) = srq.wrs.pop_front() {
            return Some(r);
        }
        if !self.rnr_waiting.swap(true, Ordering::Relaxed) {
            srq.waiters.push_back(self.me.clone());
        }
        drop(srq);
        peer.srq.refusals.fetch_add(1, Ordering::Relaxed);
        // Also retry on a timer: the peer may vanish while we wait.
        self.arm_timer(tx, Instant::now() + self.dev.net.rnr_retry_interval());
        None
    }
}

/// Why a delivery failed.
enum DeliveryError {
    /// The sender's own SGEs are no longer registered: the receive request
    /// is unused and goes back to the SRQ.
    Local(PostedRecv),
    /// The receiver refused the message; the sender completes with this status.
    Remote(WcStatus),
}

/// Moves `msg` into the receive request `recv` of `peer`.
fn deliver(src_dev: &SimDevice, msg: &Msg, recv: PostedRecv, peer: &QpCore) -> Result<(), DeliveryError> {
    let recv_wc = |status: WcStatus, byte_len: u32| WorkCompletion {
        wr_id: recv.wr_id,
        status,
        opcode: WcOpcode::Recv,
        byte_len,
        imm_data: msg.imm,
        qp_num: peer.qpn,
        vendor_err: 0,
    };
    let capacity: u64 = recv.sges.iter().map(|s| u64::from(s.length)).sum();
    if msg.len > capacity {
        peer.recv_cq.push(CqEntry { wc: recv_wc(WcStatus::LocLenErr, 0), release: None });
        return Err(DeliveryError::Remote(WcStatus::RemInvReqErr));
    }
    let outcome = with_mrs(src_dev, &peer.dev, |src_mrs, dst_mrs| {
        if let Payload::Gather(sges) = &msg.payload {
            if !sges.iter().all(|s| in_range(src_mrs, s.lkey, s.addr, s.length)) {
                return Err(None);
            }
        }
        // Check the receive SGEs the message will fill.
        let mut left = msg.len;
        for s in &recv.sges {
            if left == 0 {
                break;
            }
            let n = u64::from(s.length).min(left) as u32;
            if !in_range(dst_mrs, s.lkey, s.addr, n) {
                return Err(Some(WcStatus::LocProtErr));
            }
            left -= u64::from(n);
        }
        match &msg.payload {
            Payload::Inline(bytes) => {
                let src = [Sge { addr: bytes.as_ptr() as u64, length: bytes.len() as u32, lkey: 0 }];
                // SAFETY: `src` points into `bytes`, alive for this call; the
                // destinations are registered (checked above, and the table
                // is read-locked, so they stay registered during the copy).
                unsafe { scatter(&src, &recv.sges) };
            }
            // SAFETY: sources and destinations were checked against the
            // registration tables, which stay read-locked during the copy.
            Payload::Gather(sges) => unsafe { scatter(sges, &recv.sges) },
            Payload::Fail(_) => unreachable!("failed messages are completed before delivery"),
        }
        Ok(())
    });
    match outcome {
        Ok(()) => {
            peer.recv_cq.push(CqEntry { wc: recv_wc(WcStatus::Success, msg.len as u32), release: None });
            Ok(())
        }
        Err(None) => Err(DeliveryError::Local(recv)),
        Err(Some(status)) => {
            peer.recv_cq.push(CqEntry { wc: recv_wc(status, 0), release: None });
            Err(DeliveryError::Remote(WcStatus::RemOpErr))
        }
    }
}

/// Copies the bytes described by `src` into the memory described by `dst`,
/// in order, until the source is exhausted.
///
/// # Safety
/// Every source SGE must be readable and every destination SGE writable for
/// its length, and the destination must hold at least the source's bytes.
unsafe fn scatter(src: &[Sge], dst: &[Sge]) {
    let (mut di, mut doff) = (0usize, 0u64);
    for s in src {
        let mut soff = 0u64;
        while soff < u64::from(s.length) {
            let d = &dst[di];
            let n = (u64::from(s.length) - soff).min(u64::from(d.length) - doff);
            // SAFETY: both ranges lie inside SGEs the caller vouched for;
            // `copy` tolerates overlap (one buffer registered twice).
            unsafe { std::ptr::copy((s.addr + soff) as *const u8, (d.addr + doff) as *mut u8, n as usize) };
            soff += n;
            doff += n;
            if doff == u64::from(d.length) {
                di += 1;
                doff = 0;
            }
        }
    }
}

/// A simulated RC queue pair.
#[derive(Debug)]
pub struct SimQp(Arc<QpCore>);

impl SimQp {
    pub(crate) fn new(
        dev: Arc<SimDevice>,
        send_cq: &SimCq,
        recv_cq: &SimCq,
        srq: &SimSrq,
        caps: QpCaps,
    ) -> Result<SimQp, FabricError> {
        let info = &dev.info;
        let parts = [("send cq", &send_cq.0.dev), ("recv cq", &recv_cq.0.dev), ("srq", &srq.0.dev)];
        check_qp_create(&dev, &caps, super::SIM_MAX_INLINE, info, parts)?;
        let qpn = dev.next_qpn.fetch_add(1, Ordering::Relaxed) & 0x00FF_FFFF;
        let core = Arc::new_cyclic(|me| QpCore {
            me: me.clone(),
            dev: dev.clone(),
            qpn,
            psn: crate::util::random_u32() & 0x00FF_FFFF,
            caps,
            send_cq: send_cq.0.clone(),
            recv_cq: recv_cq.0.clone(),
            srq: srq.0.clone(),
            state: AtomicU8::new(ST_RESET),
            destroyed: AtomicBool::new(false),
            rnr_waiting: AtomicBool::new(false),
            sq_outstanding: AtomicU32::new(0),
            tx: Mutex::new(TxState::default()),
        });
        lock(&dev.qps).insert(qpn, Arc::downgrade(&core));
        Ok(SimQp(core))
    }

    fn post_one(&self, batch: &SendBatch, index: usize) -> Result<Msg, FabricError> {
        let q = &self.0;
        let wr = &batch.wrs()[index];
        // SAFETY: post_send's contract: the SGEs' memory is readable for
        // their length at post time.
        let (len, payload) = unsafe {
            prepare_send(batch, index, &q.caps, &q.sq_outstanding, |s| q.dev.check_range(s.lkey, s.addr, s.length))?
        };
        Ok(Msg {
            wr_id: wr.wr_id,
            signaled: wr.flags.contains(SendFlags::SIGNALED),
            imm: wr.imm,
            len,
            payload,
            ready_at: q.dev.arrival_time(len),
        })
    }
}

impl QueuePair for SimQp {
    fn qp_num(&self) -> u32 {
        self.0.qpn
    }

    fn endpoint(&self) -> QpEndpoint {
        endpoint(&self.0.dev.info, self.0.qpn, self.0.psn)
    }

    fn caps(&self) -> QpCaps {
        self.0.caps
    }

    fn state(&self) -> QpState {
        self.0.state()
    }

    fn connect(&self, remote: &QpEndpoint) -> Result<(), FabricError> {
        check_remote(&self.0.dev.info, remote, "remote endpoint has no sim address (is it from a verbs fabric?)")?;
        let mut tx = lock(&self.0.tx);
        if self.0.state.load(Ordering::Acquire) != ST_RESET {
            return Err(FabricError::BadState(format!(
                "connect needs RESET, QP {} is {:?}",
                self.0.qpn,
                self.0.state()
            )));
        }
        tx.remote = Some((remote.sim_addr, remote.qpn));
        tx.peer = Weak::new();
        self.0.state.store(ST_RTS, Ordering::Release);
        Ok(())
    }

    fn set_error(&self) -> Result<(), FabricError> {
        // As on hardware and rxe: ERROR is reachable from every state but
        // RESET (the verbs state table has no RESET → ERR transition).
        if self.0.state.load(Ordering::Acquire) == ST_RESET {
            return Err(FabricError::Verbs { call: "ibv_modify_qp(ERR)", errno: libc::EINVAL });
        }
        self.0.state.store(ST_ERROR, Ordering::Release);
        self.0.pump();
        Ok(())
    }

    unsafe fn post_send(&self, batch: &SendBatch) -> Result<(), PostError> {
        let state = self.0.state.load(Ordering::Acquire);
        if state != ST_RTS && state != ST_ERROR {
            let error = FabricError::Verbs { call: "ibv_post_send", errno: libc::EINVAL };
            return Err(PostError { posted: 0, error });
        }
        let mut result = Ok(());
        {
            let mut tx = lock(&self.0.tx);
            for i in 0..batch.len() {
                match self.post_one(batch, i) {
                    Ok(msg) => tx.queue.push_back(msg),
                    Err(error) => {
                        result = Err(PostError { posted: i, error });
                        break;
                    }
                }
            }
        }
        self.0.pump();
        result
    }
}

impl Drop for SimQp {
    fn drop(&mut self) {
        self.0.destroyed.store(true, Ordering::Release);
        let mut qps = lock(&self.0.dev.qps);
        qps.remove(&self.0.qpn);
    }
}
