//! The send work as threads drive it, over one [`Owned`] state: the
//! engine's send (or shared) thread through [`SendAgent`] (the idle loop's
//! `Agent` and `Sleeper`), a user's thread through [`CallerSend`]
//! (`Engine::send_from_caller`).
//!
//! The thread holds the state in each iteration, and tells callers through
//! its doorbell's word whether its last look found work (`Doorbell::mark_idle`).
//! A caller that published data reads that word (Java: in place): 0, the
//! thread is busy and sees the data in its next iteration; otherwise the
//! caller runs the iterations itself, which posts its data without a wake-up.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::agent::{sleep_together, Agent, Armed, Sleep, Sleeper, SLEEP_TIMEOUT};
use super::handler::{EngineHandler, Lent};
use super::send::SendThread;
use super::send_owner::{Holder, Outcome, Owned};
use super::stats::EngineStats;
use crate::con::{ConManager, NodeId};
use crate::fabric::{CompletionQueue, Fabric};
use crate::sys::doorbell::Doorbell;

/// The most iterations a caller runs per call: one posts its data, the next
/// hands the results and completions back to the user (on `sim` the
/// completion is there at once), so that nothing waits for the thread.
const CALLER_ITERATIONS: u32 = 4;

/// Streaming, not a round trip: callers whose runs follow each other closer
/// than this wake the send thread instead, which posts the stream in
/// batches; and the send thread says it is idle only after this long
/// without work, so that it keeps a stream whose messages come this close.
/// Shorter than a round trip (22–44 µs on `sim` here: results/2026-11-29-
/// rtt-hops.txt), longer than the gap between a streaming sender's 64 B
/// messages (1.4–2.5 M msg/s: 0.4–0.7 µs; -send-from-caller-16k-ab.txt).
const STREAM_GAP: Duration = Duration::from_micros(5);

/// The engine's send (or shared) thread's side.
pub(crate) struct SendAgent<F: Fabric, H: EngineHandler> {
    owned: Arc<Owned<SendThread<F, H>>>,
    doorbell: Arc<Doorbell>,
    mgr: Arc<ConManager<F>>,
    stats: Arc<EngineStats>,
    /// The longest sleep the user's wake-up allows, and its descriptor (set by `arm`).
    sleep_bound: Duration,
    watch_fd: Option<RawFd>,
    /// Since when its iterations found no work.
    idle_since: Option<Instant>,
}

impl<F: Fabric, H: EngineHandler> SendAgent<F, H> {
    /// The agent over `send`, and what a user's thread needs to run it.
    pub(crate) fn new(
        send: SendThread<F, H>,
        handler: Arc<H>,
        doorbell: Arc<Doorbell>,
        mgr: Arc<ConManager<F>>,
        stats: Arc<EngineStats>,
    ) -> (Self, CallerSend<F, H>) {
        let owned = Arc::new(Owned::new(send));
        let caller = CallerSend {
            owned: owned.clone(),
            handler,
            doorbell: doorbell.clone(),
            stats: stats.clone(),
            epoch: Instant::now(),
            last_run: AtomicU64::new(0),
        };
        let agent =
            SendAgent { owned, doorbell, mgr, stats, sleep_bound: SLEEP_TIMEOUT, watch_fd: None, idle_since: None };
        (agent, caller)
    }

    /// The thread's end: after a caller's last run, the state (its
    /// connections, rings and queue pairs) is dropped and no caller runs it.
    fn stop(&self) {
        self.owned.stop();
        self.doorbell.mark_idle(false);
    }

    /// The thread's iterations (its own, and a last look's).
    fn run(&self) -> usize {
        match self.owned.run(Holder::Thread, false, |s| s.iterate()) {
            Outcome::Ran { work, .. } => work,
            // A caller runs the work now (and wakes us if it leaves any).
            Outcome::Held(_) | Outcome::Stopped => 0,
        }
    }
}

impl<F: Fabric, H: EngineHandler> Agent for SendAgent<F, H> {
    fn do_work(&mut self) -> usize {
        let work = self.run();
        if work > 0 {
            self.idle_since = None;
            self.doorbell.mark_idle(false);
        } else if self.idle_since.get_or_insert_with(Instant::now).elapsed() >= STREAM_GAP {
            self.doorbell.mark_idle(true);
        }
        work
    }

    /// Wakes on the user's new data (Java reads the doorbell's word and calls
    /// `sendFromCaller`), on a connection change, or on a send completion
    /// while requests are in flight.
    fn sleep(&mut self) -> Sleep {
        sleep_together(&mut [self])
    }
}

impl<F: Fabric, H: EngineHandler> Sleeper for SendAgent<F, H> {
    fn doorbell(&self) -> &Arc<Doorbell> {
        &self.doorbell
    }

    /// Under the state: a caller holding it may leave requests in flight,
    /// so not now (it wakes us if it does).
    fn arm(&mut self) -> Armed {
        match self.owned.try_with(|s| s.arm()) {
            Some((armed, bound, fd)) => {
                (self.sleep_bound, self.watch_fd) = (bound, fd);
                armed
            }
            None => Armed::NotNow,
        }
    }

    /// The last look (this up-call also hands over the previous results).
    fn last_look(&mut self) -> usize {
        self.run()
    }

    fn sleep_bound(&self) -> Duration {
        self.sleep_bound
    }

    fn wake_fd(&self) -> Option<RawFd> {
        self.watch_fd
    }

    fn woke(&mut self, watched: bool) {
        if watched {
            if let Err(e) = self.mgr.queues().send_cq.clear_wake() {
                let me = self.mgr.imm_source();
                log::error!("node {}: clearing the send completion queue's wake-up failed: {e}", NodeId(me));
            }
        }
        self.stats.send_sleeps.fetch_add(1, Relaxed);
        self.idle_since = None;
    }
}

/// Stops the state also when the thread unwinds from a panic, before its
/// handler's `thread_stopping` clears the send role (see `RecvAgent`'s `Drop`).
impl<F: Fabric, H: EngineHandler> Drop for SendAgent<F, H> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A user's thread's side: what `Engine::send_from_caller` runs.
pub(crate) struct CallerSend<F: Fabric, H: EngineHandler> {
    owned: Arc<Owned<SendThread<F, H>>>,
    handler: Arc<H>,
    doorbell: Arc<Doorbell>,
    stats: Arc<EngineStats>,
    /// When the last call came, in ns since `epoch` (any caller's).
    epoch: Instant,
    last_run: AtomicU64,
}

impl<F: Fabric, H: EngineHandler> CallerSend<F, H> {
    /// After the user published data: runs the send iterations on this
    /// thread if the state is free (`token`: see
    /// [`EngineHandler::lend_send_role`]), until one finds nothing to do;
    /// else leaves a mark for whoever holds it. Wakes the sleeping thread
    /// where work is left for it: a stream (calls closer than
    /// [`STREAM_GAP`]), requests in flight (their completions), a run that
    /// [`CALLER_ITERATIONS`] cut short (its last iteration found work), or a
    /// state held by the thread on its way to sleep.
    pub(crate) fn run(&self, token: usize) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        if now.saturating_sub(self.last_run.swap(now, Relaxed)) < STREAM_GAP.as_nanos() as u64 {
            // A stream: the send thread batches it (awake, it sees the data).
            self.stats.send_caller_left.fetch_add(1, Relaxed);
            self.doorbell.wake_if_sleeping();
            return;
        }
        let mut outstanding = 0;
        let mut iterations = 0u32;
        let mut cut_short = false;
        let ran = self.owned.run(Holder::Caller, true, |s| {
            let _lent = Lent::send(&*self.handler, token);
            let mut work = 0;
            for _ in 0..CALLER_ITERATIONS {
                iterations += 1;
                let w = s.iterate();
                work += w;
                cut_short = w > 0;
                if w == 0 {
                    break;
                }
            }
            outstanding = s.outstanding();
            work
        });
        match ran {
            Outcome::Ran { .. } => {
                self.stats.send_caller_runs.fetch_add(u64::from(iterations), Relaxed);
                if outstanding > 0 || cut_short {
                    self.doorbell.wake_if_sleeping();
                }
            }
            // It may be arming for sleep, past its last look: the ring is kept.
            Outcome::Held(Holder::Thread) => {
                self.stats.send_caller_left.fetch_add(1, Relaxed);
                self.doorbell.wake_if_sleeping();
            }
            // That caller runs once more for our mark.
            Outcome::Held(Holder::Caller) => {
                self.stats.send_caller_left.fetch_add(1, Relaxed);
            }
            Outcome::Stopped => {}
        }
    }
}
