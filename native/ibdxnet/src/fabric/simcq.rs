//! The completion queue both simulated fabrics (`sim`, `simhost`) share:
//! entries in order, a fixed capacity that overruns as hardware does, the
//! send queue slots an entry frees when it is polled, and the completion
//! channel (`arm`, then an eventfd signalled by the next completion).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::fabric::{FabricError, WorkCompletion};
use crate::util::lock;
use crate::util::EventFd;

/// A queue pair whose send queue slots a polled completion frees.
pub(crate) trait SendSlots {
    /// Frees `n` send queue slots (an atomic: no lock is taken while polling).
    fn release_slots(&self, n: u32);
}

/// A completion plus the send queue slots its polling frees.
#[derive(Debug)]
pub(crate) struct CqEntry<Q> {
    pub wc: WorkCompletion,
    /// (queue pair, slots) released when this entry is polled.
    pub release: Option<(Weak<Q>, u32)>,
}

#[derive(Debug)]
struct CqState<Q> {
    entries: VecDeque<CqEntry<Q>>,
    overrun: bool,
}

/// A completion queue with its device `D`: each fabric's `CqCore`.
#[derive(Debug)]
pub(crate) struct DevCq<D, Q> {
    pub dev: Arc<D>,
    pub cq: SimCqCore<Q>,
}

impl<D, Q: SendSlots> DevCq<D, Q> {
    /// A queue of `cqe` entries, at most `max` (the device's limit).
    pub fn new(fabric: &'static str, dev: Arc<D>, cqe: u32, max: u32) -> Result<Self, FabricError> {
        Ok(DevCq { dev, cq: SimCqCore::new(fabric, cqe, max)? })
    }

    /// Queues a completion (see [`SimCqCore::push`]).
    pub fn push(&self, entry: CqEntry<Q>) {
        self.cq.push(entry)
    }
}

/// The queue itself; [`DevCq`] adds the device.
#[derive(Debug)]
pub(crate) struct SimCqCore<Q> {
    /// The fabric's name, for the overrun's log line.
    fabric: &'static str,
    capacity: u32,
    state: Mutex<CqState<Q>>,
    /// Set by `arm`, taken by the next completion, which signals `wake`.
    armed: AtomicBool,
    wake: EventFd,
}

impl<Q: SendSlots> SimCqCore<Q> {
    /// A queue of `cqe` entries, at most `max` (the device's limit).
    pub fn new(fabric: &'static str, cqe: u32, max: u32) -> Result<Self, FabricError> {
        if cqe == 0 || cqe > max {
            return Err(FabricError::Limit { what: "cqe", requested: u64::from(cqe), max: u64::from(max) });
        }
        let wake =
            EventFd::new().map_err(|e| FabricError::Unavailable(format!("eventfd for a completion queue: {e}")))?;
        Ok(SimCqCore {
            fabric,
            capacity: cqe,
            state: Mutex::new(CqState { entries: VecDeque::new(), overrun: false }),
            armed: AtomicBool::new(false),
            wake,
        })
    }

    /// Queues a completion; a full queue overruns (the entry is lost and the
    /// queue reports the overrun from then on, as hardware does).
    pub fn push(&self, entry: CqEntry<Q>) {
        let mut st = lock(&self.state);
        if st.entries.len() >= self.capacity as usize {
            st.overrun = true;
            log::error!("{}: completion queue of {} entries overran", self.fabric, self.capacity);
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

    /// Entries the queue holds at most.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Takes up to `out.len()` completions, freeing their send queue slots.
    pub fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize, FabricError> {
        let mut n = 0;
        let mut st = lock(&self.state);
        if st.overrun {
            return Err(FabricError::CqOverrun);
        }
        while n < out.len() {
            let Some(e) = st.entries.pop_front() else { break };
            out[n] = e.wc;
            n += 1;
            if let Some((qp, slots)) = e.release.and_then(|(qp, slots)| qp.upgrade().map(|q| (q, slots))) {
                qp.release_slots(slots);
            }
        }
        Ok(n)
    }

    /// The next completion signals the wake descriptor.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Takes back an `arm` that no completion has taken yet.
    pub fn disarm(&self) {
        self.armed.store(false, Ordering::SeqCst);
    }

    /// The descriptor the next completion after `arm` makes readable.
    pub fn wake_fd(&self) -> std::os::fd::RawFd {
        self.wake.raw_fd()
    }

    /// Consumes the wake-up.
    pub fn clear_wake(&self) {
        self.wake.reset();
    }
}
