//! The send thread (paper §7.2.3). One iteration: one `next_data_to_send`
//! call carrying the previous results and the completions, post the package
//! as a chain of WRs, poll the shared send CQ once if completions are due.
//!
//! A package is an area `[offset, offset + length)` of the node's send ring
//! (wrapping at the end). It becomes WRs of at most one receive request's
//! size, with one SGE, or two where the area wraps. Immediate data carries
//! the source node id and the flow-control byte (see [`imm`]); flow control
//! without payload is a zero-length WR. The send queue depth is never
//! exceeded: what does not fit is reported as not posted. Small WRs go
//! inline; only every k-th WR (and the last of each package) is signalled,
//! and a completion confirms all WRs of its QP up to it.

use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use super::agent::{Armed, SLEEP_TIMEOUT};
use super::config::EngineConfig;
use super::handler::{EngineHandler, SendWakeup};
use super::imm;
use super::shared::CompletedList;
use super::stats::{EngineStats, TimerId};
use super::timers::Clock;
use crate::abi::{NextWorkPackage, PrevWorkResults, NWP_VALID};
use crate::con::{ConManager, ConState, Connection, NodeId};
use crate::fabric::{CompletionQueue, Fabric, QueuePair, SendBatch, SendFlags, Sge, WcStatus, WorkCompletion};

const SEQ_BITS: u32 = 48;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// A posted WR not yet confirmed.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    seq: u64,
    bytes: u32,
    fc: u8,
}

/// Per-connection send state, owned by the send thread. Holding the `Arc`
/// keeps the queue pair and the ring alive while WRs are in flight.
#[derive(Debug)]
struct NodeSend<F: Fabric> {
    conn: Arc<Connection<F>>,
    inflight: VecDeque<InFlight>,
    next_seq: u64,
    since_signal: u32,
    /// Set after an error completion: post nothing more.
    failed: bool,
    /// The last posted WR was unsignalled and nothing follows it: a
    /// signalled zero-length WR must be posted so its completion comes.
    needs_flush: bool,
}

impl<F: Fabric> NodeSend<F> {
    fn new(conn: Arc<Connection<F>>) -> Self {
        NodeSend { conn, inflight: VecDeque::new(), next_seq: 0, since_signal: 0, failed: false, needs_flush: false }
    }
}

/// The send state for `node` if it has an established connection; stale
/// state (failed or replaced connection) moves to `draining`.
fn node_state<'a, F: Fabric>(
    nodes: &'a mut HashMap<NodeId, NodeSend<F>>,
    draining: &mut Vec<NodeSend<F>>,
    mgr: &ConManager<F>,
    node: NodeId,
) -> Option<&'a mut NodeSend<F>> {
    let stale = nodes.get(&node).is_some_and(|n| n.failed || n.conn.state() != ConState::Established);
    if stale {
        draining.extend(nodes.remove(&node));
    }
    match nodes.entry(node) {
        std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
        std::collections::hash_map::Entry::Vacant(v) => Some(v.insert(NodeSend::new(mgr.established(node)?))),
    }
}

/// The send thread's state.
pub(crate) struct SendThread<F: Fabric, H: EngineHandler> {
    mgr: Arc<ConManager<F>>,
    handler: Arc<H>,
    stats: Arc<EngineStats>,
    /// Whether the operations are timed (`stats_timers`).
    clock: Clock,
    me: u16,
    sq_size: u32,
    max_wr_bytes: u32,
    signal_interval: u32,
    max_inline: u32,
    nodes: HashMap<NodeId, NodeSend<F>>,
    draining: Vec<NodeSend<F>>,
    prev: Box<PrevWorkResults>,
    completed: CompletedList,
    /// `handler.acknowledges_handover()`, read once.
    explicit_ack: bool,
    batch: SendBatch,
    planned: Vec<InFlight>,
    wcs: Vec<WorkCompletion>,
    outstanding: u64,
    /// The manager's `state_changes` when `reap_draining` last looked at
    /// every connection, and whether one of ours failed since: without
    /// either, the look is skipped (it touched every connection's state,
    /// each iteration: dozens of cache lines with many nodes).
    seen_changes: u64,
    failed_since: bool,
    /// Some connection may need a flush (`flush_pending`).
    flush_wanted: bool,
}

impl<F: Fabric, H: EngineHandler> SendThread<F, H> {
    pub(crate) fn new(
        cfg: &EngineConfig,
        mgr: Arc<ConManager<F>>,
        handler: Arc<H>,
        stats: Arc<EngineStats>,
    ) -> Result<Self, crate::fabric::FabricError> {
        let max_inline = mgr.queues().caps.max_inline_data.min(cfg.max_inline);
        let explicit_ack = handler.acknowledges_handover();
        Ok(SendThread {
            me: cfg.node_id.0,
            sq_size: cfg.sq_size,
            max_wr_bytes: cfg.max_wr_bytes(),
            signal_interval: cfg.signal_interval,
            max_inline,
            mgr,
            handler,
            stats,
            clock: Clock { on: cfg.stats_timers },
            nodes: HashMap::new(),
            draining: Vec::new(),
            prev: Box::default(),
            // Without eviction the connections are not bounded by the limit: room for every node.
            completed: CompletedList::new(if cfg.evict_at_limit { cfg.max_connections + 64 } else { 0xFFFF })?,
            explicit_ack,
            batch: SendBatch::with_capacity(64, 128),
            planned: Vec::with_capacity(64),
            wcs: vec![WorkCompletion::default(); cfg.poll_batch as usize],
            outstanding: 0,
            seen_changes: 0,
            failed_since: true,
            flush_wanted: false,
        })
    }

    /// One loop iteration; returns the amount of work done (0 = idle).
    pub(super) fn iterate(&mut self) -> usize {
        let t = self.clock.start();
        self.completed.begin_handover();
        let next = self.handler.next_data_to_send(&self.prev, &self.completed);
        self.stats.timer(TimerId::SendUpcall).record_since(t);
        let mut work = 0;
        if !self.explicit_ack || self.completed.acknowledged() {
            *self.prev = PrevWorkResults::default();
            self.completed.clear();
            if next.flags & NWP_VALID != 0 {
                work += self.send(&next);
            }
        } else {
            // Not acknowledged (the user failed half-way): keep what it did not
            // mark applied for the next hand-over (applied entries are zero, new
            // confirmations merge into them); its package, decided on state not
            // fully updated, is not posted (a failed call writes none anyway).
            if self.completed.prev_applied() {
                *self.prev = PrevWorkResults::default();
            }
        }
        work += self.flush_pending();
        work += self.poll_completions();
        work
    }

    fn send(&mut self, p: &NextWorkPackage) -> usize {
        self.prev.node_id = p.node_id;
        self.prev.bytes_not_posted = p.length;
        self.prev.fc_not_posted = p.fc_data;
        let node = NodeId(p.node_id);
        if p.length == 0 && p.fc_data == 0 {
            return 0;
        }
        if !node.is_valid() || p.node_id == self.me {
            log::error!("node {}: work package for invalid node {node} ignored", NodeId(self.me));
            return 0;
        }
        let (me, sq, max_wr, interval, max_inline) =
            (self.mgr.imm_source(), self.sq_size, self.max_wr_bytes, self.signal_interval, self.max_inline);
        let Some(ns) = node_state(&mut self.nodes, &mut self.draining, &self.mgr, node) else {
            // Not connected (yet): everything stays unposted; creation is asynchronous.
            // A full job queue (the only error) is counted (`jobs_dropped`) and
            // logged by the manager; the next package for the node asks again.
            let _ = self.mgr.request_create(node);
            return 0;
        };
        if p.connection != 0 && p.connection != ns.conn.qp().qp_num() {
            // Written into the ring of a connection that was replaced: do not
            // read it from the new ring. The user learns of the old one's end
            // from its disconnect event.
            // Debug only: the user offers it again every iteration until the
            // disconnect event of the old connection reaches it.
            log::debug!("node {me}: package for replaced connection {} to {node} not posted", p.connection);
            return 0;
        }
        if self.draining.iter().any(|d| {
            d.conn.node() == node && !d.failed && d.conn.state() == ConState::Closing && !d.inflight.is_empty()
        }) {
            // An older connection to the node is in its orderly close with work
            // requests in flight (e.g. retried while the receiver has no buffer):
            // posted now, this one's could overtake them there and interleave the
            // two streams. The data stays unposted until they completed. Not for a
            // failed or closed one: its requests never arrive, and a queue pair
            // taken down may never complete them.
            return 0;
        }
        let ring_size = ns.conn.ring().size();
        if p.length > ring_size || p.offset >= ring_size {
            log::error!("node {me}: work package {p:?} exceeds the send ring of {ring_size} bytes; ignored");
            return 0;
        }
        ns.conn.touch();
        // Plan the WRs that fit into the send queue.
        let free_slots = sq.saturating_sub(ns.inflight.len() as u32);
        let (base, lkey) = (ns.conn.ring().address() as u64, ns.conn.ring().lkey());
        self.batch.clear();
        self.planned.clear();
        let mut pos = p.offset;
        let mut left = p.length;
        let mut fc = p.fc_data;
        let mut seq = ns.next_seq;
        let mut since = ns.since_signal;
        while (left > 0 || fc > 0) && (self.planned.len() as u32) < free_slots {
            let chunk = left.min(max_wr);
            let first = chunk.min(ring_size - pos);
            let mut sges = [Sge { addr: base + u64::from(pos), length: first, lkey }, Sge::default()];
            let nsge = if chunk == 0 {
                0
            } else if first < chunk {
                sges[1] = Sge { addr: base, length: chunk - first, lkey };
                2
            } else {
                1
            };
            let last = left == chunk || self.planned.len() as u32 + 1 == free_slots;
            since += 1;
            let mut flags = SendFlags::NONE;
            if since >= interval || last {
                flags = flags | SendFlags::SIGNALED;
                since = 0;
            }
            if chunk > 0 && chunk <= max_inline {
                flags = flags | SendFlags::INLINE;
            }
            let wr_id = (u64::from(node.0) << SEQ_BITS) | (seq & SEQ_MASK);
            self.batch.push(wr_id, &sges[..nsge], Some(imm::pack(me, fc)), flags);
            self.planned.push(InFlight { seq, bytes: chunk, fc });
            seq += 1;
            pos = (pos + chunk) & (ring_size - 1);
            left -= chunk;
            fc = 0;
        }
        if self.planned.is_empty() {
            return 0;
        }
        let planned = self.planned.len() as u32;
        if !ns.conn.begin_posting(planned, false) {
            // Closed since `node_state` looked: the data stays unposted.
            return 0;
        }
        let t = self.clock.start();
        // SAFETY: the SGEs lie in the connection's registered send ring, which
        // the NodeSend's Arc keeps alive until every WR has completed.
        let result = unsafe { ns.conn.qp().post_send(&self.batch) };
        self.stats.timer(TimerId::SendPost).record_since(t);
        let posted = match result {
            Ok(()) => self.planned.len(),
            Err(e) => {
                if !e.is_queue_full() {
                    log::error!("node {me}: posting to {node} failed: {e}; closing the connection");
                    ns.failed = true;
                    self.failed_since = true;
                    self.mgr.close(node, true);
                }
                e.posted
            }
        };
        if (posted as u32) < planned {
            ns.conn.end_posting(planned - posted as u32);
        }
        let mut bytes = 0u32;
        let mut fc_posted = 0u8;
        for f in &self.planned[..posted] {
            bytes += f.bytes;
            fc_posted = fc_posted.max(f.fc);
            ns.inflight.push_back(*f);
        }
        if posted > 0 {
            ns.next_seq = self.planned[posted - 1].seq + 1;
            let last_signaled = self.batch.wrs()[posted - 1].flags.contains(SendFlags::SIGNALED);
            ns.since_signal = if last_signaled { 0 } else { since };
            ns.needs_flush = !last_signaled;
            self.flush_wanted |= ns.needs_flush;
        }
        self.outstanding += posted as u64;
        self.prev.bytes_posted = bytes;
        self.prev.bytes_not_posted = p.length - bytes;
        self.prev.fc_posted = fc_posted;
        self.prev.fc_not_posted = p.fc_data - fc_posted;
        self.stats.add_sent(posted as u64, u64::from(bytes));
        posted
    }

    /// Posts a signalled zero-length WR where unsignalled WRs would
    /// otherwise never be confirmed (after a partially accepted chain).
    /// Closing connections get theirs too: their close waits for every
    /// work request to complete.
    fn flush_pending(&mut self) -> usize {
        if !self.flush_wanted {
            return 0;
        }
        let mut work = 0;
        let mut left = false;
        let me = self.mgr.imm_source();
        let all = self.nodes.values_mut().chain(self.draining.iter_mut());
        for ns in all.filter(|n| n.needs_flush && !n.failed) {
            if ns.inflight.len() as u32 >= self.sq_size || !ns.conn.begin_posting(1, true) {
                left = true;
                continue;
            }
            let seq = ns.next_seq;
            self.batch.clear();
            let wr_id = (u64::from(ns.conn.node().0) << SEQ_BITS) | (seq & SEQ_MASK);
            self.batch.push(wr_id, &[], Some(imm::pack(me, 0)), SendFlags::SIGNALED);
            let t = self.clock.start();
            // SAFETY: no SGEs.
            let result = unsafe { ns.conn.qp().post_send(&self.batch) };
            self.stats.timer(TimerId::SendPost).record_since(t);
            if result.is_ok() {
                ns.inflight.push_back(InFlight { seq, bytes: 0, fc: 0 });
                ns.next_seq += 1;
                ns.since_signal = 0;
                ns.needs_flush = false;
                self.outstanding += 1;
                work += 1;
            } else {
                ns.conn.end_posting(1);
                left = true;
            }
        }
        self.flush_wanted = left;
        work
    }

    fn poll_completions(&mut self) -> usize {
        if self.outstanding == 0 {
            self.reap_draining();
            return 0;
        }
        let t = self.clock.start();
        let polled = self.mgr.queues().send_cq.poll(&mut self.wcs);
        self.stats.timer(TimerId::SendPoll).record_since(t);
        let n = match polled {
            Ok(n) => n,
            Err(e) => {
                log::error!("node {}: polling the send completion queue failed: {e}", NodeId(self.me));
                self.stats.errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return 0;
            }
        };
        for i in 0..n {
            let wc = self.wcs[i];
            self.complete(&wc);
        }
        self.reap_draining();
        n
    }

    fn complete(&mut self, wc: &WorkCompletion) {
        let node = NodeId((wc.wr_id >> SEQ_BITS) as u16);
        let seq = wc.wr_id & SEQ_MASK;
        let me = NodeId(self.me);
        // Only the current connection's confirmations go to the user: the ring
        // of a closing or replaced one is abandoned (its new ring must not
        // advance by them).
        let reportable = self
            .nodes
            .get(&node)
            .is_some_and(|n| n.conn.qp().qp_num() == wc.qp_num && n.conn.state() == ConState::Established);
        let current = self.nodes.get_mut(&node).filter(|n| n.conn.qp().qp_num() == wc.qp_num);
        let ns = match current {
            Some(ns) => ns,
            None => match self.draining.iter_mut().find(|n| n.conn.qp().qp_num() == wc.qp_num) {
                Some(ns) => ns,
                None => {
                    log::warn!("node {me}: completion for unknown WR {:#x} on qp {}", wc.wr_id, wc.qp_num);
                    return;
                }
            },
        };
        let mut bytes = 0u32;
        let mut fc = 0u16;
        let mut count = 0u64;
        while let Some(f) = ns.inflight.front() {
            if (f.seq & SEQ_MASK) > seq {
                break;
            }
            bytes += f.bytes;
            fc += u16::from(f.fc);
            count += 1;
            ns.inflight.pop_front();
        }
        self.outstanding -= count;
        ns.conn.end_posting(count as u32);
        if wc.status == WcStatus::Success {
            if reportable && !self.completed.add(node.0, wc.qp_num, bytes, fc) {
                log::error!("node {me}: completion list full; confirmation for {node} lost");
            }
            return;
        }
        if !ns.failed {
            ns.failed = true;
            self.failed_since = true;
            if wc.status != WcStatus::WrFlushErr {
                log::error!("node {me}: send to {node} failed with {}; closing the connection", wc.status);
            }
            self.stats.errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if self.mgr.established(node).is_some_and(|c| Arc::ptr_eq(&c, &ns.conn)) {
                self.mgr.close(node, true);
            } else if ns.conn.state() == ConState::Closing {
                // Closed in order (the user heard `Closed`), yet data in flight
                // did not arrive: that must not go unreported.
                self.mgr.report_lost(node);
            }
        }
    }

    /// Moves failed or closing connections to the draining list and drops
    /// those whose WRs have all completed (releasing queue pair and ring).
    fn reap_draining(&mut self) {
        // Before the look (Acquire): a change after it bumps the count again.
        let changes = self.mgr.state_changes();
        if changes != self.seen_changes || self.failed_since {
            self.seen_changes = changes;
            self.failed_since = false;
            self.move_stale_to_draining();
        }
        // A closing connection's WRs complete normally, a closed one's are
        // flushed (its queue pair is in ERROR): either way they all come back.
        self.draining.retain(|n| !n.inflight.is_empty());
    }

    /// Moves the state of failed and no longer established connections to `draining`.
    fn move_stale_to_draining(&mut self) {
        let stale: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.failed || n.conn.state() != ConState::Established)
            .map(|(k, _)| *k)
            .collect();
        for node in stale {
            if let Some(ns) = self.nodes.remove(&node) {
                self.draining.push(ns);
            }
        }
    }
}

impl<F: Fabric, H: EngineHandler> SendThread<F, H> {
    /// Before its thread sleeps (`send_agent`): the user's own wake-up
    /// (upstream's writes into the rings), then the send completion queue,
    /// only while requests are in flight; with the longest sleep and the
    /// user's descriptor.
    pub(super) fn arm(&mut self) -> (Armed, Duration, Option<RawFd>) {
        let (bound, fd) = match self.handler.arm_send_wakeup() {
            SendWakeup::Doorbell => (SLEEP_TIMEOUT, None),
            SendWakeup::Watch { fd, bound } => (bound.min(SLEEP_TIMEOUT), Some(fd)),
            SendWakeup::Poll => return (Armed::NotNow, SLEEP_TIMEOUT, None),
        };
        if self.outstanding == 0 {
            return (Armed::Doorbell, bound, fd);
        }
        let cq = &self.mgr.queues().send_cq;
        let armed = match cq.arm() {
            Ok(true) => Armed::Watch(cq.wake_fd()),
            Ok(false) => Armed::NotNow,
            Err(e) => {
                log::error!("node {}: arming the send completion queue failed: {e}", NodeId(self.me));
                self.stats.errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Armed::NotNow
            }
        };
        (armed, bound, fd)
    }

    /// Work requests posted and not yet completed.
    pub(super) fn outstanding(&self) -> u64 {
        self.outstanding
    }
}
