//! Simulated completion queues and shared receive queues.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::qp::QpCore;
use super::SimDevice;
use crate::fabric::{CompletionQueue, FabricError, PostError, RecvBatch, Sge, SharedReceiveQueue, WorkCompletion};
use crate::util::lock;
use crate::util::EventFd;

/// A completion plus the send queue slots its polling frees.
#[derive(Debug)]
pub(crate) struct CqEntry {
    pub wc: WorkCompletion,
    /// (queue pair, slots) released when this entry is polled.
    pub release: Option<(Weak<QpCore>, u32)>,
}

#[derive(Debug, Default)]
struct CqState {
    entries: VecDeque<CqEntry>,
    overrun: bool,
}

/// The shared part of a simulated completion queue.
#[derive(Debug)]
pub(crate) struct CqCore {
    pub dev: Arc<SimDevice>,
    capacity: u32,
    state: Mutex<CqState>,
    /// Set by `arm`, taken by the next completion, which signals `wake`.
    armed: AtomicBool,
    wake: EventFd,
}

impl CqCore {
    /// Queues a completion; a full queue overruns (the entry is lost and the
    /// queue reports the overrun from then on, as hardware does).
    pub fn push(&self, entry: CqEntry) {
        let mut st = lock(&self.state);
        if st.entries.len() >= self.capacity as usize {
            st.overrun = true;
            log::error!("sim: completion queue of {} entries overran", self.capacity);
            return;
        }
        st.entries.push_back(entry);
        drop(st);
        // After the entry is visible: an `arm` that missed this signal sees
        // the entry in its next poll (see `CompletionQueue::arm`).
        if self.armed.swap(false, Ordering::SeqCst) {
            self.wake.signal();
        }
    }
}

/// A simulated completion queue.
#[derive(Debug, Clone)]
pub struct SimCq(pub(crate) Arc<CqCore>);

impl SimCq {
    pub(crate) fn new(dev: Arc<SimDevice>, cqe: u32) -> Result<SimCq, FabricError> {
        let max = dev.info.max_cqe;
        if cqe == 0 || cqe > max {
            return Err(FabricError::Limit { what: "cqe", requested: u64::from(cqe), max: u64::from(max) });
        }
        let wake =
            EventFd::new().map_err(|e| FabricError::Unavailable(format!("eventfd for a completion queue: {e}")))?;
        Ok(SimCq(Arc::new(CqCore {
            dev,
            capacity: cqe,
            state: Mutex::new(CqState::default()),
            armed: AtomicBool::new(false),
            wake,
        })))
    }
}

impl CompletionQueue for SimCq {
    fn capacity(&self) -> u32 {
        self.0.capacity
    }

    fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize, FabricError> {
        self.0.dev.net.progress();
        let mut n = 0;
        let mut st = lock(&self.0.state);
        if st.overrun {
            return Err(FabricError::CqOverrun);
        }
        while n < out.len() {
            let Some(e) = st.entries.pop_front() else { break };
            out[n] = e.wc;
            n += 1;
            // Free the send queue slots here: an atomic, no other lock taken.
            if let Some(qp) = e.release.and_then(|(qp, slots)| qp.upgrade().map(|q| (q, slots))) {
                qp.0.sq_outstanding.fetch_sub(qp.1, Ordering::AcqRel);
            }
        }
        Ok(n)
    }

    fn arm(&self) -> Result<bool, FabricError> {
        // Timed deliveries (delays, retries) progress only when polled.
        if self.0.dev.net.has_timers.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.0.armed.store(true, Ordering::SeqCst);
        Ok(true)
    }

    fn wake_fd(&self) -> std::os::fd::RawFd {
        self.0.wake.raw_fd()
    }

    fn clear_wake(&self) -> Result<(), FabricError> {
        self.0.wake.reset();
        Ok(())
    }
}

/// A receive request waiting in the SRQ.
#[derive(Debug)]
pub(crate) struct PostedRecv {
    pub wr_id: u64,
    pub sges: Vec<Sge>,
}

#[derive(Debug, Default)]
pub(crate) struct SrqState {
    pub wrs: VecDeque<PostedRecv>,
    /// Queue pairs whose head message waits for a receive request.
    pub waiters: Vec<Weak<QpCore>>,
}

/// The shared part of a simulated SRQ.
#[derive(Debug)]
pub(crate) struct SrqCore {
    pub dev: Arc<SimDevice>,
    pub max_wr: u32,
    pub max_sge: u32,
    pub state: Mutex<SrqState>,
}

/// A simulated shared receive queue.
#[derive(Debug, Clone)]
pub struct SimSrq(pub(crate) Arc<SrqCore>);

impl SimSrq {
    pub(crate) fn new(dev: Arc<SimDevice>, max_wr: u32, max_sge: u32) -> Result<SimSrq, FabricError> {
        let (lim_wr, lim_sge) = (dev.info.max_srq_wr, dev.info.max_srq_sge);
        if max_wr == 0 || max_wr > lim_wr {
            return Err(FabricError::Limit { what: "max_srq_wr", requested: max_wr.into(), max: lim_wr.into() });
        }
        if max_sge == 0 || max_sge > lim_sge {
            return Err(FabricError::Limit { what: "max_srq_sge", requested: max_sge.into(), max: lim_sge.into() });
        }
        Ok(SimSrq(Arc::new(SrqCore { dev, max_wr, max_sge, state: Mutex::new(SrqState::default()) })))
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
        let mut result = Ok(());
        let waiters = {
            let mut st = lock(&self.0.state);
            for (i, wr) in batch.wrs().iter().enumerate() {
                if wr.num_sge > self.0.max_sge {
                    result = Err(PostError {
                        posted: i,
                        error: FabricError::Verbs { call: "ibv_post_srq_recv", errno: libc::EINVAL },
                    });
                    break;
                }
                if st.wrs.len() >= self.0.max_wr as usize {
                    result = Err(PostError {
                        posted: i,
                        error: FabricError::Verbs { call: "ibv_post_srq_recv", errno: libc::ENOMEM },
                    });
                    break;
                }
                st.wrs.push_back(PostedRecv { wr_id: wr.wr_id, sges: batch.sges_of(wr).to_vec() });
            }
            std::mem::take(&mut st.waiters)
        };
        // Receiver-not-ready senders can go on now.
        for qp in waiters.iter().filter_map(Weak::upgrade) {
            qp.pump();
        }
        result
    }
}
