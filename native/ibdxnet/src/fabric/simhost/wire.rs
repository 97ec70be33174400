//! The "wire": writing messages into the peer's ring, placing received ones
//! into receive requests, completing sends against the peer's progress, and
//! the device's wire thread that does it without the engine's help.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::copy::{covering, gather, scatter};
use super::dir;
use super::qp::{Inner, Msg, QpCore, RxCur, Sent};
use super::queues::CqEntry;
use super::ring::{Channel, RecHdr, F_FIRST, F_IMM, F_LAST, ST_ERROR, ST_RESET, ST_RTS};
use super::Device;
use crate::fabric::simparts::{in_range, Payload};
use crate::fabric::{WcOpcode, WcStatus, WorkCompletion};
use crate::util::lock;

/// How long a message waits for its peer to connect before retry-exceeded.
pub(crate) const CONNECT_BUDGET: Duration = Duration::from_secs(1);
/// How often a peer with requests outstanding is checked for life.
pub(crate) const LIVENESS_PERIOD: Duration = Duration::from_millis(100);
/// The longest the wire thread sleeps (bounds the liveness checks' delay).
const SLEEP: Duration = Duration::from_millis(50);

/// What the peer check found.
enum Peer {
    Ready,
    /// Not connected yet: wait within the connect budget.
    Wait,
    /// Gone, dead, in ERROR, or connected elsewhere.
    Failed,
}

impl QpCore {
    /// Queues a send completion, freeing its slot and those of the
    /// unsignalled requests before it when polled.
    fn complete(&self, g: &mut Inner, wr_id: u64, status: WcStatus) {
        let slots = g.unsignaled + 1;
        g.unsignaled = 0;
        let wc = WorkCompletion { wr_id, status, opcode: WcOpcode::Send, qp_num: self.qpn, ..Default::default() };
        self.send_cq.push(CqEntry { wc, release: Some((self.me.clone(), slots)) });
    }

    /// Fails the oldest outstanding request with `status`, moves to ERROR
    /// and flushes the rest.
    fn fail_head(&self, g: &mut Inner, status: WcStatus) {
        if let Some(s) = g.inflight.pop_front() {
            self.complete(g, s.wr_id, status);
        } else if let Some(m) = g.queue.pop_front() {
            g.front_off = 0;
            self.complete(g, m.wr_id, status);
        }
        self.set_state(ST_ERROR);
        self.flush(g);
    }

    fn flush(&self, g: &mut Inner) {
        while let Some(s) = g.inflight.pop_front() {
            self.complete(g, s.wr_id, WcStatus::WrFlushErr);
        }
        g.front_off = 0;
        while let Some(m) = g.queue.pop_front() {
            self.complete(g, m.wr_id, WcStatus::WrFlushErr);
        }
    }

    /// Finds, maps and checks the peer queue pair.
    fn check_peer(&self, g: &mut Inner, now: Instant) -> Peer {
        let Some((addr, qpn)) = g.remote else { return Peer::Failed };
        if g.peer_dev.is_none() {
            g.peer_dev = self.dev.peer(addr);
        }
        let Some(peer_dev) = g.peer_dev.clone() else { return Peer::Failed };
        if g.link.is_none() {
            let path = dir::qp_path(&self.dev.dir, addr, qpn);
            let Ok(file) = std::fs::OpenOptions::new().read(true).write(true).open(&path) else { return Peer::Failed };
            match Channel::map(&file, None) {
                Ok(ch)
                    if ch.hdr().ident.owner_addr.load(Ordering::Relaxed) == addr
                        && ch.hdr().ident.owner_qpn.load(Ordering::Relaxed) == qpn =>
                {
                    g.link = Some(ch)
                }
                _ => return Peer::Failed,
            }
        }
        let ctl = &g.link.as_ref().expect("mapped above").hdr().control;
        match ctl.state.load(Ordering::Acquire) {
            ST_RTS => {
                let me = (self.dev.info.sim_addr, self.qpn);
                if (ctl.remote_addr.load(Ordering::Relaxed), ctl.remote_qpn.load(Ordering::Relaxed)) != me {
                    return Peer::Failed;
                }
                g.wait_since = None;
            }
            ST_RESET => {
                let since = *g.wait_since.get_or_insert(now);
                if now.duration_since(since) >= CONNECT_BUDGET {
                    return Peer::Failed;
                }
                return Peer::Wait;
            }
            _ => return Peer::Failed,
        }
        if g.last_check.is_none_or(|t| now.duration_since(t) >= LIVENESS_PERIOD) {
            g.last_check = Some(now);
            if !peer_dev.alive() {
                return Peer::Failed;
            }
        }
        Peer::Ready
    }

    /// Completes what the peer consumed, writes what fits into its ring,
    /// fails everything if the peer is gone. True if anything happened.
    pub(crate) fn progress_tx(&self, g: &mut Inner, now: Instant) -> bool {
        if g.queue.is_empty() && g.inflight.is_empty() {
            return false;
        }
        if self.raw_state() != ST_RTS {
            self.flush(g);
            return true;
        }
        let Some(did) = self.reap(g) else { return true };
        if g.queue.is_empty() && g.inflight.is_empty() {
            return did;
        }
        match self.check_peer(g, now) {
            Peer::Ready => {}
            Peer::Wait => return did,
            Peer::Failed => {
                // What the peer consumed before it failed still succeeded
                // (its progress is visible now that its state was read).
                if self.reap(g).is_some() && !(g.queue.is_empty() && g.inflight.is_empty()) {
                    self.fail_head(g, WcStatus::RetryExcErr);
                }
                return true;
            }
        }
        let mut wrote = false;
        while let Some(m) = g.queue.front() {
            if let Payload::Fail(status) = m.payload {
                if g.inflight.is_empty() {
                    self.fail_head(g, status);
                    return true;
                }
                break; // completions stay in posting order
            }
            match self.write_front(g) {
                Some(true) => wrote = true,
                Some(false) => {
                    wrote = true;
                    break;
                }
                None => break,
            }
        }
        if wrote {
            if let Some(p) = &g.peer_dev {
                p.doorbell().ring();
            }
        }
        did | wrote
    }

    /// Completes the requests the peer consumed, in order. `Some(progress)`,
    /// or `None` if the peer refused one (everything is then failed).
    fn reap(&self, g: &mut Inner) -> Option<bool> {
        let Some(link) = &g.link else { return Some(false) };
        let c = &link.hdr().consumer;
        // The consumer names a refused message before `tail` passes it.
        let tail = c.tail.load(Ordering::Acquire);
        let nak = c.nak_seq.load(Ordering::Acquire).checked_sub(1);
        let status = WcStatus::from_raw(c.nak_status.load(Ordering::Relaxed));
        let mut did = false;
        loop {
            let head_seq = g.inflight.front().map(|s| s.seq).or_else(|| g.queue.front().map(|m| m.seq));
            if head_seq.is_some() && head_seq == nak {
                self.fail_head(g, status);
                return None;
            }
            match g.inflight.front() {
                Some(s) if tail >= s.end => {
                    let s = g.inflight.pop_front().expect("front exists");
                    if s.signaled {
                        self.complete(g, s.wr_id, WcStatus::Success);
                    } else {
                        g.unsignaled += 1;
                    }
                    did = true;
                }
                _ => return Some(did),
            }
        }
    }

    /// Writes fragments of the head message while the ring has room.
    /// `Some(true)`: all of it is in; `Some(false)`: part of it; `None`: nothing.
    fn write_front(&self, g: &mut Inner) -> Option<bool> {
        let link = g.link.as_ref().expect("checked peer");
        let max = link.max_fragment() as u64;
        let mut any = false;
        loop {
            let m = g.queue.front_mut().expect("caller checked");
            let off = g.front_off;
            let n = (m.len - off).min(max);
            let last = off + n == m.len;
            let flags = if off == 0 { F_FIRST } else { 0 } | if last { F_LAST } else { 0 };
            let flags = flags | if m.imm.is_some() { F_IMM } else { 0 };
            let hdr =
                RecHdr { len: n as u32, flags, total: m.len as u32, imm: m.imm.unwrap_or(0), seq: m.seq, reserved: 0 };
            let pushed = match &m.payload {
                Payload::Inline(bytes) => link.push(hdr, |dst| {
                    // SAFETY: `push` hands out `n` writable bytes; the source
                    // range lies inside `bytes`.
                    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().add(off as usize), dst, n as usize) }
                }),
                Payload::Gather(sges) => {
                    let mrs = self.dev.mrs.read();
                    if !sges.iter().all(|s| in_range(&mrs, s.lkey, s.addr, s.length)) {
                        // Deregistered since the post: fails once the
                        // requests before it completed.
                        m.payload = Payload::Fail(WcStatus::LocProtErr);
                        return any.then_some(false);
                    }
                    // SAFETY: the SGEs are registered (checked, and the table
                    // stays read-locked during the copy), so readable for
                    // their lengths; `push` hands out `n` writable bytes.
                    link.push(hdr, |dst| unsafe { gather(sges, off, n, dst) })
                }
                Payload::Fail(_) => unreachable!("failed requests are not written"),
            };
            let end = pushed?;
            any = true;
            g.front_off += n;
            if last {
                let m: Msg = g.queue.pop_front().expect("front exists");
                g.front_off = 0;
                g.inflight.push_back(Sent { seq: m.seq, wr_id: m.wr_id, signaled: m.signaled, end });
                return Some(true);
            }
        }
    }

    /// Refuses message `seq`: names it to the sender, moves to ERROR, frees
    /// the ring up to `next`.
    fn refuse(&self, seq: u64, status: WcStatus, next: u64) {
        let c = &self.inbound.hdr().consumer;
        c.nak_status.store(status.to_raw(), Ordering::Relaxed);
        c.nak_seq.store(seq + 1, Ordering::Release);
        self.inbound.release(next);
        // Last: a sender that sees ERROR sees the refusal and the progress.
        self.set_state(ST_ERROR);
    }

    fn recv_done(&self, wr_id: u64, status: WcStatus, byte_len: u32, imm: Option<u32>) {
        let wc = WorkCompletion {
            wr_id,
            status,
            opcode: WcOpcode::Recv,
            byte_len,
            imm_data: imm,
            qp_num: self.qpn,
            vendor_err: 0,
        };
        self.recv_cq.push(CqEntry { wc, release: None });
    }

    /// Places what the peer wrote into receive requests, in order, until the
    /// SRQ runs dry (receiver not ready) or the ring is empty. True if any
    /// record was consumed.
    pub(crate) fn progress_rx(&self, g: &mut Inner) -> bool {
        if self.raw_state() != ST_RTS {
            return false;
        }
        let mut consumed = false;
        loop {
            let rec = match self.inbound.peek() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(()) => {
                    log::warn!("simhost: QP {:#x}: malformed record from the peer", self.qpn);
                    self.set_state(ST_ERROR);
                    break;
                }
            };
            let h = rec.hdr;
            if h.flags & F_FIRST != 0 && g.rx.is_none() {
                let Some(recv) = self.srq.take() else { break };
                let imm = (h.flags & F_IMM != 0).then_some(h.imm);
                if u64::from(h.total) > recv.capacity() {
                    self.recv_done(recv.wr_id, WcStatus::LocLenErr, 0, imm);
                    self.refuse(h.seq, WcStatus::RemInvReqErr, rec.next);
                    consumed = true;
                    break;
                }
                g.rx = Some(RxCur { recv, seq: h.seq, total: h.total, filled: 0, imm });
            }
            let fits = |c: &RxCur| c.seq == h.seq && c.filled.checked_add(h.len).is_some_and(|e| e <= c.total);
            let Some(cur) = g.rx.as_mut().filter(|c| fits(c) && (h.flags & F_FIRST == 0) == (c.filled > 0)) else {
                log::warn!("simhost: QP {:#x}: record out of sequence", self.qpn);
                self.set_state(ST_ERROR);
                break;
            };
            let placed = {
                let mrs = self.dev.mrs.read();
                let ok =
                    covering(&cur.recv.sges, cur.filled, h.len).all(|(s, o, n)| in_range(&mrs, s.lkey, s.addr + o, n));
                if ok {
                    // SAFETY: the destination ranges are registered (checked,
                    // table read-locked during the copy); the payload is the
                    // peeked record's, readable until released below.
                    unsafe { scatter(rec.payload, h.len, &cur.recv.sges, cur.filled) };
                }
                ok
            };
            if !placed {
                let cur = g.rx.take().expect("current");
                self.recv_done(cur.recv.wr_id, WcStatus::LocProtErr, 0, cur.imm);
                self.refuse(h.seq, WcStatus::RemOpErr, rec.next);
                consumed = true;
                break;
            }
            cur.filled += h.len;
            if h.flags & F_LAST != 0 {
                let cur = g.rx.take().expect("current");
                if cur.filled != cur.total {
                    log::warn!("simhost: QP {:#x}: message shorter than announced", self.qpn);
                    self.set_state(ST_ERROR);
                    break;
                }
                self.recv_done(cur.recv.wr_id, WcStatus::Success, cur.total, cur.imm);
            }
            // After the completion is queued: the sender completes against this.
            self.inbound.release(rec.next);
            consumed = true;
        }
        if consumed {
            if g.peer_dev.is_none() {
                g.peer_dev = g.remote.and_then(|(addr, _)| self.dev.peer(addr));
            }
            if let Some(p) = &g.peer_dev {
                p.doorbell().ring();
            }
        }
        consumed
    }

    /// One round of both directions. True if anything happened.
    pub(crate) fn progress(&self, now: Instant) -> bool {
        let mut g = lock(&self.inner);
        let rx = self.progress_rx(&mut g);
        let tx = self.progress_tx(&mut g, now);
        rx | tx
    }
}

/// The wire thread of a device: moves data until the device is dropped.
/// It holds the device only during a round, and sleeps on the doorbell of
/// its published file.
pub(crate) fn run(dev: Weak<Device>, published: Arc<dir::Published>, stopping: Arc<AtomicBool>) {
    let mut qps: Vec<Arc<QpCore>> = Vec::new();
    let mut round = || -> Option<bool> {
        let d = dev.upgrade()?;
        qps.extend(lock(&d.qps).values().filter_map(Weak::upgrade));
        drop(d);
        let now = Instant::now();
        let mut did = false;
        for qp in qps.iter() {
            did |= qp.progress(now);
        }
        qps.clear();
        Some(did)
    };
    while !stopping.load(Ordering::Acquire) {
        // Idle: sleep on the doorbell at once. A wire thread that yielded
        // first lost each yield to busy-polling threads on a full machine
        // (upstream DXNet's Java): its requests' minimum went from 0.4-0.9 to
        // 3 ms (bench/results/2026-11-28-dxnetmain-host-threads-ab.txt, -yield-ab.txt).
        match round() {
            None => return,
            Some(true) => {}
            Some(false) => {
                published.doorbell().wait(SLEEP, || round().unwrap_or(true));
            }
        }
    }
}
