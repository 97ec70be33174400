//! The receive thread (paper §7.2.4). One iteration: poll the shared
//! receive CQ in a batch bounded by the free space of the incoming ring,
//! refill the SRQ with one chained post, turn completions into ring entries
//! (the filled buffers in order; unused ones go back to the pool), then hand
//! the ring to the user, who consumes none, some or all entries.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::agent::Armed;
use super::config::EngineConfig;
use super::handler::EngineHandler;
use super::imm;
use super::recv_pool::RecvPool;
use super::shared::IncomingRing;
use super::stats::{EngineStats, TimerId};
use super::timers::Clock;
use crate::abi::{IncomingEntry, NO_BUFFER};
use crate::con::ConManager;
use crate::fabric::{CompletionQueue, Fabric, RecvBatch, Sge, SharedReceiveQueue, WcStatus, WorkCompletion};

/// The receive thread's state.
pub(crate) struct RecvThread<F: Fabric, H: EngineHandler> {
    mgr: Arc<ConManager<F>>,
    handler: Arc<H>,
    pool: Arc<RecvPool<F>>,
    stats: Arc<EngineStats>,
    /// Whether the operations are timed (`stats_timers`).
    clock: Clock,
    ring: IncomingRing,
    sges_per_wr: u32,
    srq_size: u32,
    /// Buffers of each posted receive request, by slot (= wr_id).
    slots: Vec<Vec<u32>>,
    free_slots: Vec<u32>,
    posted: u32,
    batch: RecvBatch,
    sge_scratch: Vec<Sge>,
    taken: Vec<u32>,
    wcs: Vec<WorkCompletion>,
    /// The queue pair last closed for a protocol violation.
    violator: u32,
    /// Receive requests kept posted: starts at `initial_target`, doubles
    /// (up to `srq_size`) when a quarter of it or more was consumed between
    /// two refills, halves after [`IDLE`] without that.
    target: u32,
    initial_target: u32,
    /// Receive requests completed since the last refill.
    consumed: u32,
    /// The target was pressed since the last maintenance.
    busy: bool,
    last_busy: Instant,
    next_maintenance: Instant,
    /// Per slab: since when none of its buffers is in use.
    slab_unused_since: Vec<Option<Instant>>,
    /// Fewer free buffers than the refill needs plus this grow the pool.
    low_water: usize,
}

/// How long a slab stays unused, or the posting target unpressed, before it
/// is given back (halved).
const IDLE: Duration = Duration::from_secs(3);
/// How often the receive thread checks for idle slabs and an idle target.
const MAINTENANCE: Duration = Duration::from_millis(500);

impl<F: Fabric, H: EngineHandler> RecvThread<F, H> {
    pub(crate) fn new(
        cfg: &EngineConfig,
        mgr: Arc<ConManager<F>>,
        handler: Arc<H>,
        pool: Arc<RecvPool<F>>,
        stats: Arc<EngineStats>,
    ) -> Result<Self, crate::fabric::FabricError> {
        let srq = mgr.queues().srq.max_wr().min(cfg.srq_size);
        let sges = cfg.recv_sges_per_wr.max(1);
        // Half the first slab posted: the other half is for what the user holds.
        let initial_target = (pool.slab_buffers() / sges / 2).clamp(1, srq.max(1));
        let now = Instant::now();
        Ok(RecvThread {
            target: initial_target,
            initial_target,
            consumed: 0,
            busy: false,
            last_busy: now,
            next_maintenance: now + MAINTENANCE,
            slab_unused_since: vec![None; pool.slab_count() as usize],
            low_water: (pool.slab_buffers() / 4).max(sges) as usize,
            ring: IncomingRing::new(cfg.incoming_ring_size)?,
            sges_per_wr: cfg.recv_sges_per_wr,
            srq_size: srq,
            slots: (0..srq).map(|_| Vec::with_capacity(cfg.recv_sges_per_wr as usize)).collect(),
            free_slots: (0..srq).rev().collect(),
            posted: 0,
            batch: RecvBatch::with_capacity(srq as usize, (srq * cfg.recv_sges_per_wr) as usize),
            sge_scratch: Vec::with_capacity(cfg.recv_sges_per_wr as usize),
            taken: Vec::with_capacity(srq as usize),
            wcs: vec![WorkCompletion::default(); cfg.poll_batch as usize],
            violator: 0,
            clock: Clock { on: cfg.stats_timers },
            mgr,
            handler,
            pool,
            stats,
        })
    }

    /// One loop iteration; returns the amount of work done (0 = idle).
    pub(crate) fn iterate(&mut self) -> usize {
        let room = (self.ring.free() / self.sges_per_wr.max(1)) as usize;
        let want = room.min(self.wcs.len());
        let polled = if want > 0 {
            let t = self.clock.start();
            let polled = self.mgr.queues().recv_cq.poll(&mut self.wcs[..want]);
            self.stats.timer(TimerId::RecvPoll).record_since(t);
            match polled {
                Ok(n) => n,
                Err(e) => {
                    log::error!("node {}: polling the receive completion queue failed: {e}", self.mgr.node_id());
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    0
                }
            }
        } else {
            0
        };
        let refilled = self.refill();
        for i in 0..polled {
            let wc = self.wcs[i];
            self.process(&wc);
        }
        let dispatched = self.dispatch();
        self.pool.set_posted(self.posted * self.sges_per_wr);
        let now = Instant::now();
        if now >= self.next_maintenance {
            self.maintain(now);
        }
        polled + refilled + dispatched
    }

    /// Buffers the next refill takes (to reach the target).
    fn wanted(&self) -> usize {
        (self.target.saturating_sub(self.posted) * self.sges_per_wr) as usize
    }

    /// Registers slabs while the pool has fewer free buffers than the
    /// refill needs plus the low-water mark (and a slab is left).
    fn grow_pool(&mut self) {
        let need = self.wanted() + self.low_water;
        while self.pool.available() < need {
            match self.pool.grow(&self.mgr.queues().fabric) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    log::error!("node {}: registering another receive slab failed: {e}", self.mgr.node_id());
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
    }

    /// Halves an unpressed posting target, and gives back slabs unused for [`IDLE`].
    fn maintain(&mut self, now: Instant) {
        self.next_maintenance = now + MAINTENANCE;
        if std::mem::take(&mut self.busy) {
            self.last_busy = now;
        } else if now - self.last_busy >= IDLE {
            // Halved at every maintenance while unpressed. Requests posted
            // beyond it stay posted until traffic consumes them (an SRQ
            // cannot take a request back), so their slabs stay too.
            self.target = (self.target / 2).max(self.initial_target);
        }
        let slab = self.pool.slab_buffers() as usize;
        for s in (1..self.pool.slab_count()).rev() {
            if !self.pool.slab_unused(s) {
                self.slab_unused_since[s as usize] = None;
                continue;
            }
            let since = *self.slab_unused_since[s as usize].get_or_insert(now);
            // Keep it if the pool would at once need another.
            let spare = self.pool.available().saturating_sub(slab) >= self.wanted() + self.low_water;
            if now - since >= IDLE && spare && self.pool.retire(s) {
                self.slab_unused_since[s as usize] = None;
            }
        }
    }

    /// Tops the SRQ up with chained receive requests of `sges_per_wr` buffers.
    fn refill(&mut self) -> usize {
        if std::mem::take(&mut self.consumed) >= self.target.div_ceil(4) {
            // A quarter or more consumed since the last refill: load.
            self.busy = true;
            self.target = (self.target * 2).min(self.srq_size);
        }
        if self.posted >= self.target {
            return 0;
        }
        if self.pool.available() < self.wanted() + self.low_water {
            self.grow_pool();
        }
        self.batch.clear();
        let mut taken = std::mem::take(&mut self.taken);
        taken.clear();
        while self.posted + (self.batch.len() as u32) < self.target {
            let Some(&slot) = self.free_slots.last() else { break };
            self.sge_scratch.clear();
            let bufs = &mut self.slots[slot as usize];
            bufs.clear();
            while bufs.len() < self.sges_per_wr as usize {
                match self.pool.take() {
                    Some(id) => {
                        bufs.push(id);
                        self.sge_scratch.push(self.pool.sge(id));
                    }
                    None => break,
                }
            }
            if bufs.len() < self.sges_per_wr as usize {
                // Pool exhausted: put the partial set back and try later.
                for id in bufs.drain(..) {
                    Self::give_back(&self.pool, &self.stats, &self.mgr, id);
                }
                break;
            }
            self.free_slots.pop();
            taken.push(slot);
            self.batch.push(u64::from(slot), &self.sge_scratch);
        }
        if self.batch.is_empty() {
            self.taken = taken;
            return 0;
        }
        let t = self.clock.start();
        // SAFETY: every SGE is a pool buffer owned by the slot until its
        // completion is processed; the pool outlives the SRQ's use here.
        let result = unsafe { self.mgr.queues().srq.post_recv(&self.batch) };
        self.stats.timer(TimerId::RecvPost).record_since(t);
        let accepted = match result {
            Ok(()) => taken.len(),
            Err(e) => {
                log::error!("node {}: refilling the SRQ failed: {e}", self.mgr.node_id());
                e.posted
            }
        };
        for &slot in &taken[accepted..] {
            for id in self.slots[slot as usize].drain(..) {
                Self::give_back(&self.pool, &self.stats, &self.mgr, id);
            }
            self.free_slots.push(slot);
        }
        self.posted += accepted as u32;
        self.taken = taken;
        accepted
    }

    fn process(&mut self, wc: &WorkCompletion) {
        let slot = wc.wr_id as usize;
        let Some(bufs) = self.slots.get_mut(slot) else {
            log::error!("node {}: receive completion with unknown wr_id {}", self.mgr.node_id(), wc.wr_id);
            return;
        };
        let mut bufs = std::mem::take(bufs);
        self.posted -= 1;
        self.consumed += 1;
        let me = self.mgr.node_id();
        let mut used = 0;
        match (wc.status, wc.imm_data) {
            (WcStatus::Success, Some(imm)) if !self.source_matches_qp(wc, imm::source(imm)) => {}
            (WcStatus::Success, Some(imm)) => {
                let source = imm::source(imm);
                let fc = imm::fc(imm);
                self.mgr.received_from(source);
                let size = self.pool.buffer_size();
                let mut left = wc.byte_len;
                while left > 0 && used < bufs.len() {
                    let n = left.min(size);
                    let id = bufs[used];
                    let e = IncomingEntry {
                        source_node_id: source,
                        fc_data: if used == 0 { fc } else { 0 },
                        data_length: n,
                        buffer_id: id,
                        connection: wc.qp_num,
                        data_address: self.pool.address(id),
                        ..Default::default()
                    };
                    let pushed = self.ring.push(e);
                    debug_assert!(pushed, "poll batch is bounded by ring space");
                    used += 1;
                    left -= n;
                }
                if wc.byte_len == 0 && fc != 0 {
                    let e = IncomingEntry {
                        source_node_id: source,
                        fc_data: fc,
                        buffer_id: NO_BUFFER,
                        connection: wc.qp_num,
                        ..Default::default()
                    };
                    self.ring.push(e);
                }
                self.stats.add_received(u64::from(wc.byte_len));
            }
            (WcStatus::Success, None) => {
                log::error!("node {me}: message without immediate data on qp {} dropped", wc.qp_num);
            }
            (status, _) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                if let Some(node) = self.mgr.node_of_qpn(wc.qp_num) {
                    log::error!("node {me}: receive from {node} failed with {status}; closing the connection");
                    self.mgr.close(node, true);
                } else if status != WcStatus::WrFlushErr {
                    log::error!("node {me}: receive on qp {} failed with {status}", wc.qp_num);
                }
            }
        }
        for &id in &bufs[used..] {
            Self::give_back(&self.pool, &self.stats, &self.mgr, id);
        }
        bufs.clear();
        self.slots[slot] = bufs;
        self.free_slots.push(slot as u32);
    }

    /// The immediate data names the source node; it must be the node of the
    /// queue pair that delivered the message (a peer cannot speak for another
    /// node). A mismatch is a protocol violation: counted, and that
    /// connection is closed if it is still open. False: drop the message.
    fn source_matches_qp(&mut self, wc: &WorkCompletion, source: u16) -> bool {
        let me = self.mgr.node_id();
        match self.mgr.source_of_qpn(wc.qp_num) {
            Some((node, _)) if node.0 == source => true,
            Some((node, open)) => {
                self.stats.protocol_violations.fetch_add(1, Ordering::Relaxed);
                // Once per connection (completions still in the queue come from it too).
                if open && self.violator != wc.qp_num {
                    self.violator = wc.qp_num;
                    log::warn!(
                        "node {me}: data on the connection to {node} (qp {}) claims to come from node {source}; closing it",
                        wc.qp_num
                    );
                    self.mgr.close(node, true);
                }
                false
            }
            None => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                log::error!("node {me}: data from node {source} on unknown qp {} dropped", wc.qp_num);
                false
            }
        }
    }

    fn dispatch(&mut self) -> usize {
        if self.ring.used() == 0 {
            return 0;
        }
        let t = self.clock.start();
        let consumed = self.handler.received(&self.ring);
        self.stats.timer(TimerId::RecvUpcall).record_since(t);
        self.ring.consume(consumed) as usize
    }

    /// Returns a buffer this thread holds to the pool. A refusal means the
    /// buffer was handed out twice, a bug: logged and counted as an error.
    /// (Takes fields, not `self`: callers hold a slot of `self.slots`.)
    fn give_back(pool: &RecvPool<F>, stats: &EngineStats, mgr: &ConManager<F>, id: u32) {
        if let Err(e) = pool.give_back(id) {
            stats.errors.fetch_add(1, Ordering::Relaxed);
            log::error!("node {}: {e} (held by the receive thread)", mgr.node_id());
        }
    }

    /// Returns every buffer still held (ring entries not consumed).
    pub(crate) fn drain(&mut self) {
        while let Some(e) = self.ring.get(0) {
            if e.buffer_id != NO_BUFFER {
                Self::give_back(&self.pool, &self.stats, &self.mgr, e.buffer_id);
            }
            self.ring.consume(1);
        }
    }
}

// The thread's and the waiting callers' sides of sleeping: `recv_agent`.
impl<F: Fabric, H: EngineHandler> RecvThread<F, H> {
    /// Entries the user left in the ring: while any are, the thread must
    /// keep calling (it takes them at a later up-call), not sleep.
    pub(crate) fn ring_used(&self) -> u32 {
        self.ring.used()
    }

    /// Asks the receive completion queue for a wake-up at its next completion.
    pub(crate) fn arm_cq(&self) -> Armed {
        arm_recv_cq(&self.mgr, &self.stats)
    }

    /// The last look before sleeping: entries the user left in the ring
    /// count as work.
    pub(crate) fn last_look(&mut self) -> usize {
        let work = self.iterate();
        if work > 0 || self.ring.used() > 0 {
            work.max(1)
        } else {
            0
        }
    }
}

/// Asks `mgr`'s receive completion queue for a wake-up at its next
/// completion (the receive thread, or the last waiting caller for it).
pub(crate) fn arm_recv_cq<F: Fabric>(mgr: &ConManager<F>, stats: &EngineStats) -> Armed {
    let cq = &mgr.queues().recv_cq;
    match cq.arm() {
        Ok(true) => Armed::Watch(cq.wake_fd()),
        Ok(false) => Armed::NotNow,
        Err(e) => {
            log::error!("node {}: arming the receive completion queue failed: {e}", mgr.node_id());
            stats.errors.fetch_add(1, Ordering::Relaxed);
            Armed::NotNow
        }
    }
}
