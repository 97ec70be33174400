//! The network's timers: delayed, throttled, cut-link and receiver-not-ready
//! messages, each a queue pair to pump again once its time has come.
//!
//! A thread of the network's own (`sim-timers`, started with the first
//! timer, ended with the network) runs them when they are due, as a host
//! channel adapter retries on its own; a poll of any completion queue runs the
//! due ones as well. So a completion queue may be armed, and its thread
//! sleep, while timers are pending (and the thread runs: without it, arming
//! fails as long as any timer is pending): before the thread existed, no engine
//! thread of the process could sleep while any queue pair of it waited on a
//! timer (at 64 nodes in one process, almost always).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::time::Instant;

use super::qp::QpCore;
use crate::util::lock;

/// Pending timers and the thread that runs them.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    list: Mutex<TimerList>,
    /// Rung when a timer earlier than the thread's next deadline is armed,
    /// and when the network goes.
    ring: Condvar,
    /// Whether `list` holds any timer (a poll's fast path).
    any: AtomicBool,
    /// Whether the thread runs (false before the first timer, if it could
    /// not start, or after it ended).
    running: AtomicBool,
}

#[derive(Debug, Default)]
struct TimerList {
    due: Vec<(Instant, Weak<QpCore>)>,
    /// The deadline the thread waits for (None: it waits for a timer).
    next: Option<Instant>,
    started: bool,
    closed: bool,
}

impl Timers {
    /// Arms a timer: `qp` is pumped again once `at` has passed.
    pub fn arm(self: &Arc<Self>, at: Instant, qp: Weak<QpCore>) {
        let mut l = lock(&self.list);
        l.due.push((at, qp));
        self.any.store(true, Ordering::Release);
        if !l.started {
            l.started = true;
            let me = self.clone();
            // Running from here on: the thread's guard clears it when it ends.
            // One that cannot start leaves the timers to the polls (as before
            // it existed); `started` stays set: no retry per timer.
            self.running.store(true, Ordering::Release);
            if std::thread::Builder::new().name("sim-timers".into()).spawn(move || me.run()).is_err() {
                self.running.store(false, Ordering::Release);
            }
        }
        if l.next.is_none_or(|n| at < n) {
            l.next = Some(at);
            self.ring.notify_one();
        }
    }

    /// Whether only polls move the pending timers on (the thread is not
    /// running): then a completion queue must not be armed to sleep on.
    pub fn need_polls(&self) -> bool {
        self.any.load(Ordering::Acquire) && !self.running.load(Ordering::Acquire)
    }

    /// Runs the due timers (a poll's share of the work).
    pub fn progress(&self) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let due = self.take_due(&mut lock(&self.list), Instant::now());
        fire(due);
    }

    /// Ends the thread (the network goes).
    pub fn close(&self) {
        lock(&self.list).closed = true;
        self.ring.notify_all();
    }

    /// Takes the timers due at `now` out of `l`.
    fn take_due(&self, l: &mut TimerList, now: Instant) -> Vec<Weak<QpCore>> {
        let mut due = Vec::new();
        l.due.retain(|(at, qp)| {
            if *at <= now {
                due.push(qp.clone());
                false
            } else {
                true
            }
        });
        self.any.store(!l.due.is_empty(), Ordering::Release);
        due
    }

    /// The thread: sleeps until the earliest deadline (or a new earlier
    /// one), runs what is due, until the network closes. A poisoned lock is
    /// taken as it is: every change to the list is whole before anything
    /// that could panic.
    fn run(self: Arc<Self>) {
        /// Clears `running` however the thread ends (a panic in a pump too).
        struct Ended<'a>(&'a AtomicBool);
        impl Drop for Ended<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _ended = Ended(&self.running);
        unpin();
        let mut l = lock(&self.list);
        loop {
            if l.closed {
                return;
            }
            let now = Instant::now();
            l.next = l.due.iter().map(|(at, _)| *at).min();
            match l.next {
                Some(at) if at <= now => {
                    let due = self.take_due(&mut l, now);
                    drop(l);
                    fire(due);
                    l = lock(&self.list);
                }
                Some(at) => {
                    l = match self.ring.wait_timeout(l, at - now) {
                        Ok((g, _)) => g,
                        Err(poisoned) => poisoned.into_inner().0,
                    }
                }
                None => l = self.ring.wait(l).unwrap_or_else(PoisonError::into_inner),
            }
        }
    }
}

/// Gives the thread the process's CPUs (its first thread's mask, what
/// `taskset` set): it inherits the mask of the thread that armed the first
/// timer, which may be an engine thread pinned to one core.
fn unpin() {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, and both calls read or
    // write exactly one of its size; on failure the thread keeps the mask it
    // inherited.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if libc::sched_getaffinity(libc::getpid(), size, &mut set) == 0 {
            libc::sched_setaffinity(0, size, &set);
        }
    }
}

/// Pumps the queue pairs of due timers (outside the list's lock: lock order).
fn fire(due: Vec<Weak<QpCore>>) {
    for qp in due.iter().filter_map(Weak::upgrade) {
        qp.timer_fired();
        qp.pump();
    }
}
