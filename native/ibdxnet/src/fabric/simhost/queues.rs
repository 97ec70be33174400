//! Completion queues and shared receive queues of `simhost` (process local:
//! only data crosses processes).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::qp::QpCore;
use super::Device;
use crate::fabric::{CompletionQueue, FabricError, PostError, RecvBatch, Sge, SharedReceiveQueue, WorkCompletion};
use crate::util::{lock, EventFd};

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

/// The shared part of a completion queue.
#[derive(Debug)]
pub(crate) struct CqCore {
    pub dev: Arc<Device>,
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
            log::error!("simhost: completion queue of {} entries overran", self.capacity);
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

/// A completion queue of `simhost`.
#[derive(Debug, Clone)]
pub struct SimHostCq(pub(crate) Arc<CqCore>);

impl SimHostCq {
    pub(crate) fn new(dev: Arc<Device>, cqe: u32) -> Result<SimHostCq, FabricError> {
        let max = dev.info.max_cqe;
        if cqe == 0 || cqe > max {
            return Err(FabricError::Limit { what: "cqe", requested: u64::from(cqe), max: u64::from(max) });
        }
        let wake =
            EventFd::new().map_err(|e| FabricError::Unavailable(format!("eventfd for a completion queue: {e}")))?;
        Ok(SimHostCq(Arc::new(CqCore {
            dev,
            capacity: cqe,
            state: Mutex::new(CqState::default()),
            armed: AtomicBool::new(false),
            wake,
        })))
    }
}

impl CompletionQueue for SimHostCq {
    fn capacity(&self) -> u32 {
        self.0.capacity
    }

    fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize, FabricError> {
        let mut n = 0;
        let mut st = lock(&self.0.state);
        if st.overrun {
            return Err(FabricError::CqOverrun);
        }
        while n < out.len() {
            let Some(e) = st.entries.pop_front() else { break };
            out[n] = e.wc;
            n += 1;
            if let Some((qp, slots)) = e.release.and_then(|(qp, slots)| qp.upgrade().map(|q| (q, slots))) {
                qp.sq_outstanding.fetch_sub(slots, Ordering::AcqRel);
            }
        }
        Ok(n)
    }

    fn arm(&self) -> Result<bool, FabricError> {
        // The wire thread moves data without polling: a wake-up can always
        // be promised.
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

impl PostedRecv {
    /// Total bytes the request can take.
    pub fn capacity(&self) -> u64 {
        self.sges.iter().map(|s| u64::from(s.length)).sum()
    }
}

#[derive(Debug, Default)]
struct SrqState {
    wrs: VecDeque<PostedRecv>,
    /// A queue pair found the SRQ empty (receiver not ready): the next post
    /// wakes the wire thread.
    starved: bool,
}

/// The shared part of an SRQ.
#[derive(Debug)]
pub(crate) struct SrqCore {
    pub dev: Arc<Device>,
    max_wr: u32,
    max_sge: u32,
    state: Mutex<SrqState>,
}

impl SrqCore {
    /// The next receive request, or `None` (and marked starved).
    pub fn take(&self) -> Option<PostedRecv> {
        let mut st = lock(&self.state);
        let r = st.wrs.pop_front();
        st.starved |= r.is_none();
        r
    }
}

/// A shared receive queue of `simhost`.
#[derive(Debug, Clone)]
pub struct SimHostSrq(pub(crate) Arc<SrqCore>);

impl SimHostSrq {
    pub(crate) fn new(dev: Arc<Device>, max_wr: u32, max_sge: u32) -> Result<SimHostSrq, FabricError> {
        let (lim_wr, lim_sge) = (dev.info.max_srq_wr, dev.info.max_srq_sge);
        if max_wr == 0 || max_wr > lim_wr {
            return Err(FabricError::Limit { what: "max_srq_wr", requested: max_wr.into(), max: lim_wr.into() });
        }
        if max_sge == 0 || max_sge > lim_sge {
            return Err(FabricError::Limit { what: "max_srq_sge", requested: max_sge.into(), max: lim_sge.into() });
        }
        Ok(SimHostSrq(Arc::new(SrqCore { dev, max_wr, max_sge, state: Mutex::new(SrqState::default()) })))
    }
}

impl SharedReceiveQueue for SimHostSrq {
    fn max_wr(&self) -> u32 {
        self.0.max_wr
    }

    fn max_sge(&self) -> u32 {
        self.0.max_sge
    }

    unsafe fn post_recv(&self, batch: &RecvBatch) -> Result<(), PostError> {
        let mut result = Ok(());
        let starved = {
            let mut st = lock(&self.0.state);
            for (i, wr) in batch.wrs().iter().enumerate() {
                let errno = if wr.num_sge > self.0.max_sge {
                    libc::EINVAL
                } else if st.wrs.len() >= self.0.max_wr as usize {
                    libc::ENOMEM
                } else {
                    st.wrs.push_back(PostedRecv { wr_id: wr.wr_id, sges: batch.sges_of(wr).to_vec() });
                    continue;
                };
                result = Err(PostError { posted: i, error: FabricError::Verbs { call: "ibv_post_srq_recv", errno } });
                break;
            }
            std::mem::take(&mut st.starved)
        };
        // Receiver-not-ready messages can go on now.
        if starved {
            self.0.dev.kick();
        }
        result
    }
}
