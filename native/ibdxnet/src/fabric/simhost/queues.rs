//! Completion queues and shared receive queues of `simhost` (process local:
//! only data crosses processes).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::qp::QpCore;
use super::Device;
use crate::fabric::simcq::SendSlots;
use crate::fabric::simparts::{check_srq_limits, queue_recvs, PostedRecv};
use crate::fabric::{CompletionQueue, FabricError, PostError, RecvBatch, SharedReceiveQueue, WorkCompletion};
use crate::util::lock;

/// A completion plus the send queue slots its polling frees.
pub(crate) type CqEntry = crate::fabric::simcq::CqEntry<QpCore>;

/// The shared part of a completion queue: the queue and its device.
pub(crate) type CqCore = crate::fabric::simcq::DevCq<Device, QpCore>;

impl SendSlots for QpCore {
    fn release_slots(&self, n: u32) {
        self.sq_outstanding.fetch_sub(n, Ordering::AcqRel);
    }
}

/// A completion queue of `simhost`.
#[derive(Debug, Clone)]
pub struct SimHostCq(pub(crate) Arc<CqCore>);

impl SimHostCq {
    pub(crate) fn new(dev: Arc<Device>, cqe: u32) -> Result<SimHostCq, FabricError> {
        let max = dev.info.max_cqe;
        Ok(SimHostCq(Arc::new(CqCore::new("simhost", dev, cqe, max)?)))
    }
}

impl CompletionQueue for SimHostCq {
    fn capacity(&self) -> u32 {
        self.0.cq.capacity()
    }

    fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize, FabricError> {
        self.0.cq.poll(out)
    }

    fn arm(&self) -> Result<bool, FabricError> {
        // The wire thread moves data without polling: a wake-up can always
        // be promised.
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
        check_srq_limits(&dev.info, max_wr, max_sge)?;
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
        let (result, starved) = {
            let mut st = lock(&self.0.state);
            let result = queue_recvs(&mut st.wrs, self.0.max_wr, self.0.max_sge, batch);
            (result, std::mem::take(&mut st.starved))
        };
        // Receiver-not-ready messages can go on now.
        if starved {
            self.0.dev.kick();
        }
        result
    }
}
