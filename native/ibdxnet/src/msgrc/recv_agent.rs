//! The receive work as threads drive it, over one [`Owned`] state (the
//! combining lock of `send_owner`): the engine's receive (or shared) thread
//! through [`RecvAgent`], and a user's thread that waits for a response
//! through [`CallerRecv`] (`Engine::recv_from_caller`, issue 31: fewer
//! hand-offs per round trip). A waiting caller polls the receive side
//! itself, so its response reaches it without waking the receive thread
//! and then the caller; meanwhile the receive thread sleeps, leaving the
//! cores to the threads that work.
//!
//! Who watches the completion queue (no completion may go unnoticed):
//! - While callers wait (`waiting` > 0), they poll it: the thread sleeps
//!   *covered*, without arming the queue (on `sim` an armed queue costs the
//!   poster a signal per completion, and the wake-up would bring the thread
//!   back to compete with the caller), but with its descriptor in its wait.
//! - The last caller to leave arms the queue for a sleeping thread and polls
//!   once more (a completion before the arm signals nothing).
//! - A caller that arrives while the thread sleeps armed takes the arm back
//!   where the queue can (`CompletionQueue::disarm`): it covers that sleep.
//!
//! The thread announces its sleep on its doorbell (store, full fence), then
//! reads `waiting`; a caller changes `waiting` (a sequentially consistent
//! read-modify-write), fences, then reads the doorbell's word. So either the
//! thread sees the last caller gone and arms the queue itself, or that
//! caller sees the thread asleep and arms it (both arming is harmless).

use std::os::fd::RawFd;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering::*};
use std::sync::Arc;

use super::agent::{sleep_together, Agent, Armed, Sleep, Sleeper};
use super::handler::{EngineHandler, Lent};
use super::recv::{arm_recv_cq, RecvThread};
use super::send_owner::{Holder, Outcome, Owned};
use super::stats::EngineStats;
use crate::con::ConManager;
use crate::fabric::{CompletionQueue, Fabric};
use crate::sys::doorbell::Doorbell;

/// What the engine's thread and the waiting callers share.
struct Shared<F: Fabric, H: EngineHandler> {
    owned: Owned<RecvThread<F, H>>,
    /// Callers between `begin` and `end`.
    waiting: AtomicU32,
    doorbell: Arc<Doorbell>,
    mgr: Arc<ConManager<F>>,
    stats: Arc<EngineStats>,
    /// Tests only: the last caller leaves without arming for the sleeping
    /// thread (the negative control of `tests/recv_from_caller.rs`: a
    /// completion after it waits for the thread's 100 ms timeout).
    skip_arm_on_leave: AtomicBool,
}

/// The engine's receive (or shared) thread's side.
pub(crate) struct RecvAgent<F: Fabric, H: EngineHandler> {
    shared: Arc<Shared<F, H>>,
    /// This sleep left the queue unarmed (callers wait) and watches its descriptor.
    covered: bool,
}

impl<F: Fabric, H: EngineHandler> RecvAgent<F, H> {
    /// The agent over `recv`, and what a user's thread needs to run it.
    pub(crate) fn new(
        recv: RecvThread<F, H>,
        handler: Arc<H>,
        doorbell: Arc<Doorbell>,
        mgr: Arc<ConManager<F>>,
        stats: Arc<EngineStats>,
    ) -> (Self, CallerRecv<F, H>) {
        let shared = Arc::new(Shared {
            owned: Owned::new(recv),
            waiting: AtomicU32::new(0),
            doorbell,
            mgr,
            stats,
            skip_arm_on_leave: AtomicBool::new(false),
        });
        (RecvAgent { shared: shared.clone(), covered: false }, CallerRecv { shared, handler })
    }

    /// The thread's end: after a caller's last poll, the buffers still held
    /// go back to the pool and no caller runs the state any more.
    fn stop(&self) {
        self.shared.owned.stop_with(|s| s.drain());
    }

    /// The thread's iterations (`last`: its last look before sleeping).
    fn run(&self, last: bool) -> usize {
        let f = |s: &mut RecvThread<F, H>| if last { s.last_look() } else { s.iterate() };
        match self.shared.owned.run(Holder::Thread, false, f) {
            Outcome::Ran { work, .. } => work,
            // A waiting caller polls now.
            Outcome::Held(_) | Outcome::Stopped => 0,
        }
    }
}

impl<F: Fabric, H: EngineHandler> Agent for RecvAgent<F, H> {
    fn do_work(&mut self) -> usize {
        self.run(false)
    }

    /// Wakes on a receive completion, a returned buffer (the pool rings) or,
    /// covered, the last waiting caller's arming.
    fn sleep(&mut self) -> Sleep {
        sleep_together(&mut [self])
    }

    /// Callers wait and poll: sleep now rather than compete with them.
    fn covered(&self) -> bool {
        self.shared.waiting.load(Relaxed) > 0
    }
}

impl<F: Fabric, H: EngineHandler> Sleeper for RecvAgent<F, H> {
    fn doorbell(&self) -> &Arc<Doorbell> {
        &self.shared.doorbell
    }

    /// Not while the user has left entries in the ring (it takes them at a
    /// later up-call), unless callers wait: they make those up-calls, and
    /// the last one wakes the thread if entries are left.
    fn may_sleep(&self) -> bool {
        self.covered() || self.shared.owned.try_with(|s| s.ring_used() == 0).unwrap_or(false)
    }

    fn arm(&mut self) -> Armed {
        // After the doorbell's announce and its fence (see the module doc).
        self.covered = self.shared.waiting.load(SeqCst) > 0;
        if self.covered {
            return Armed::Doorbell;
        }
        self.shared.owned.try_with(|s| s.arm_cq()).unwrap_or(Armed::NotNow)
    }

    fn last_look(&mut self) -> usize {
        self.run(true)
    }

    fn wake_fd(&self) -> Option<RawFd> {
        self.covered.then(|| self.shared.mgr.queues().recv_cq.wake_fd())
    }

    fn woke(&mut self, watched: bool) {
        if watched || self.covered {
            let s = &self.shared;
            if let Err(e) = s.mgr.queues().recv_cq.clear_wake() {
                log::error!("node {}: clearing the receive completion queue's wake-up failed: {e}", s.mgr.node_id());
            }
        }
        self.covered = false;
        self.shared.stats.recv_sleeps.fetch_add(1, Relaxed);
    }
}

/// What a poll by a waiting caller found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerPoll {
    /// It ran an iteration: the amount of work (0 = nothing came).
    Ran(usize),
    /// Someone else runs the receive work now (the thread, or another caller).
    Held,
    /// The engine stopped.
    Stopped,
}

/// Stops the state also when the thread unwinds from a panic, before its
/// handler's `thread_stopping` clears the receive role: no caller holds the
/// role (its up-call token lent) after that.
impl<F: Fabric, H: EngineHandler> Drop for RecvAgent<F, H> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A waiting user's thread's side: what `Engine::recv_from_caller` runs.
pub(crate) struct CallerRecv<F: Fabric, H: EngineHandler> {
    shared: Arc<Shared<F, H>>,
    handler: Arc<H>,
}

impl<F: Fabric, H: EngineHandler> CallerRecv<F, H> {
    /// A caller starts waiting (and polling), if the thread sleeps or other
    /// callers poll already: an awake thread polls anyway, and hands over
    /// for less than a caller's polls cost it (down-calls, an up-call each;
    /// bench/README). False: nothing to end. If the thread sleeps armed,
    /// its queue's arm is taken back: this caller covers that sleep now.
    pub(crate) fn begin(&self) -> bool {
        let s = &self.shared;
        if s.waiting.load(Relaxed) == 0 && !s.doorbell.is_sleeping() {
            return false;
        }
        if s.waiting.fetch_add(1, SeqCst) == 0 {
            fence(SeqCst);
            if s.doorbell.is_sleeping() {
                s.mgr.queues().recv_cq.disarm();
            }
        }
        true
    }

    /// One receive iteration on this thread (`token`: see
    /// [`EngineHandler::lend_recv_role`]), if nobody else runs one now.
    pub(crate) fn poll(&self, token: usize) -> CallerPoll {
        let ran = self.shared.owned.run(Holder::Caller, false, |s| {
            let _lent = Lent::recv(&*self.handler, token);
            s.iterate()
        });
        match ran {
            Outcome::Ran { work, .. } => {
                if work > 0 {
                    self.shared.stats.recv_caller_runs.fetch_add(1, Relaxed);
                }
                CallerPoll::Ran(work)
            }
            Outcome::Held(_) => CallerPoll::Held,
            Outcome::Stopped => CallerPoll::Stopped,
        }
    }

    /// A caller stops waiting. The last one arms the queue for a sleeping
    /// thread, then polls once more; the thread is woken where it must poll
    /// itself (entries left in the ring, a queue that cannot arm now).
    pub(crate) fn end(&self, token: usize) {
        let s = &self.shared;
        if s.waiting.fetch_sub(1, SeqCst) != 1 {
            return; // the others still poll
        }
        fence(SeqCst);
        if !s.doorbell.is_sleeping() {
            return; // awake: it sees nobody waiting when it goes to sleep, and arms itself
        }
        if s.skip_arm_on_leave.load(Relaxed) {
            return;
        }
        // Armed before the lock is tried, not under it: a holder that answers
        // our mark runs its own closure (the thread's last look only polls),
        // and a caller that began after us and took an arm back (`disarm`)
        // must find its own arm after it.
        let mut must_wake = arm_recv_cq(&s.mgr, &s.stats) == Armed::NotNow;
        let ran = s.owned.run(Holder::Caller, true, |r| {
            let _lent = Lent::recv(&*self.handler, token);
            let work = r.iterate();
            must_wake |= r.ring_used() > 0;
            work
        });
        match ran {
            Outcome::Ran { .. } if !must_wake => {}
            // The thread holds it (in its last look, or awake): waking it is
            // the sure way; another caller that holds it is waiting again.
            Outcome::Held(Holder::Caller) | Outcome::Stopped => {}
            _ => {
                s.doorbell.wake_if_sleeping();
            }
        }
    }
}

/// The waiting caller's side as the engine keeps it (not generic over the handler).
pub(crate) trait WaitingCaller: Send + Sync {
    /// See [`CallerRecv::begin`].
    fn begin(&self) -> bool;
    /// See [`CallerRecv::poll`].
    fn poll(&self, token: usize) -> CallerPoll;
    /// See [`CallerRecv::end`].
    fn end(&self, token: usize);
    /// Tests only: see `Shared::skip_arm_on_leave`.
    fn skip_arm_on_leave(&self, skip: bool);
}

impl<F: Fabric, H: EngineHandler> WaitingCaller for CallerRecv<F, H> {
    fn begin(&self) -> bool {
        CallerRecv::begin(self)
    }

    fn poll(&self, token: usize) -> CallerPoll {
        CallerRecv::poll(self, token)
    }

    fn end(&self, token: usize) {
        CallerRecv::end(self, token);
    }

    fn skip_arm_on_leave(&self, skip: bool) {
        self.shared.skip_arm_on_leave.store(skip, Relaxed);
    }
}
