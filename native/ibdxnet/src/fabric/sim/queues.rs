//! Simulated completion queues and shared receive queues.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::qp::QpCore;
use super::SimDevice;
use crate::fabric::simcq::SendSlots;
use crate::fabric::simparts::{check_srq_limits, queue_recvs, PostedRecv};
use crate::fabric::{CompletionQueue, FabricError, PostError, RecvBatch, SharedReceiveQueue, WorkCompletion};
use crate::util::lock;

/// A completion plus the send queue slots its polling frees.
pub(crate) type CqEntry = crate::fabric::simcq::CqEntry<QpCore>;

/// The shared part of a completion queue: the queue and its device.
pub(crate) type CqCore = crate::fabric::simcq::DevCq<SimDevice, QpCore>;

impl SendSlots for QpCore {
    fn release_slots(&self, n: u32) {
        self.sq_outstanding.fetch_sub(n, Ordering::AcqRel);
    }
}

/// A simulated completion queue.
#[derive(Debug, Clone)]
pub struct SimCq(pub(crate) Arc<CqCore>);

impl SimCq {
    pub(crate) fn new(dev: Arc<SimDevice>, cqe: u32) -> Result<SimCq, FabricError> {
        let max = dev.info.max_cqe;
        Ok(SimCq(Arc::new(CqCore::new("sim", dev, cqe, max)?)))
    }
}

impl CompletionQueue for SimCq {
    fn capacity(&self) -> u32 {
        self.0.cq.capacity()
    }

    fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize, FabricError> {
        self.0.dev.net.progress();
        self.0.cq.poll(out)
    }

    fn arm(&self) -> Result<bool, FabricError> {
        // Timed deliveries (delays, retries) go on without polls while the
        // network's timer thread runs; without it only polls move them.
        if self.0.dev.net.timers.need_polls() {
            return Ok(false);
        }
        self.0.cq.arm();
        Ok(true)
    }

    fn wake_fd(&self) -> std::os::fd::RawFd {
        self.0.cq.wake_fd()
    }

    fn disarm(&self) {
        self.0.cq.disarm();
    }

    fn clear_wake(&self) -> Result<(), FabricError> {
        self.0.cq.clear_wake();
        Ok(())
    }
}

#[derive(Debug, Default)]
pub(crate) struct SrqState {
    pub wrs: VecDeque<PostedRecv>,
    /// Queue pairs whose head message waits for a receive request, oldest
    /// first; each at most once (its `rnr_waiting`).
    pub waiters: VecDeque<Weak<QpCore>>,
}

/// The shared part of a simulated SRQ.
#[derive(Debug)]
pub(crate) struct SrqCore {
    pub dev: Arc<SimDevice>,
    pub max_wr: u32,
    pub max_sge: u32,
    pub state: Mutex<SrqState>,
    /// Times a sender found no receive request (receiver not ready).
    pub refusals: AtomicU64,
}

/// A simulated shared receive queue.
#[derive(Debug, Clone)]
pub struct SimSrq(pub(crate) Arc<SrqCore>);

impl SimSrq {
    pub(crate) fn new(dev: Arc<SimDevice>, max_wr: u32, max_sge: u32) -> Result<SimSrq, FabricError> {
        check_srq_limits(&dev.info, max_wr, max_sge)?;
        let state = Mutex::new(SrqState::default());
        Ok(SimSrq(Arc::new(SrqCore { dev, max_wr, max_sge, state, refusals: AtomicU64::new(0) })))
    }

    /// How many times a sender found this SRQ without a receive request
    /// (receiver not ready): each is a retry the hardware would make.
    pub fn refusals(&self) -> u64 {
        self.0.refusals.load(Ordering::Relaxed)
    }
}

impl SharedReceiveQueue for SimSrq {
    fn max_wr(&self) -> u32 {
        self.0.max_wr
    }

    fn max_sge(&self) -> u32 {
        self.0.max_sge
    }

    unsafe fn post_recv(&self, batch: &RecvBatch) -> Result<(), PostError> {
        let result = queue_recvs(&mut lock(&self.0.state).wrs, self.0.max_wr, self.0.max_sge, batch);
        // Receiver-not-ready senders go on, oldest first, while requests are
        // left: pumping every waiter on each post had all but a few fail again
        // (at 64 nodes in one process, millions of times a run). The others
        // stay queued for the next post (or their retry timer).
        loop {
            let qp = {
                let mut st = lock(&self.0.state);
                if st.wrs.is_empty() {
                    break;
                }
                let Some(w) = st.waiters.pop_front() else { break };
                let Some(qp) = w.upgrade() else { continue };
                qp.rnr_waiting.store(false, Ordering::Relaxed);
                qp
            };
            qp.pump();
        }
        result
    }
}
