//! What the send and receive threads have in common: the idle loop that
//! drives them (work, then busy/yield/park/sleep by the amount of work,
//! paper §7.2.5), the sleep contract each implements (in parts, [`Sleeper`],
//! put together by [`sleep_together`]), and [`Both`]: the one engine thread
//! of `engine_threads=shared`, doing the send work then the receive work.
//! Apart from `engine` so that the threads' modules and the module that
//! starts them do not use each other.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::sys::doorbell::Doorbell;
use crate::sys::parking::{Parking, ParkingConfig};

/// The longest an engine thread sleeps without being woken: a safety net
/// (every event that needs a thread wakes it: completions, Java's doorbell,
/// connection changes, returned buffers). Each look costs tens of µs, so
/// 10 looks a second keep an idle node's engine under 0.1 % of a core.
pub(crate) const SLEEP_TIMEOUT: Duration = Duration::from_millis(100);

/// How an attempt to sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sleep {
    /// Blocked until the timeout, or (`true`) until the doorbell or a queue woke it.
    Slept(bool),
    /// The last look before blocking found this much work.
    FoundWork(usize),
    /// Blocking is not possible now (work only polling moves on).
    NotNow,
}

/// A send or receive thread as its idle loop drives it.
pub(crate) trait Agent {
    /// One iteration; the amount of work done (0 = idle).
    fn do_work(&mut self) -> usize;
    /// Announces sleep on the thread's doorbell, arms what can wake it, looks
    /// for work once more, and blocks if there is none (`sys::doorbell`).
    fn sleep(&mut self) -> Sleep;
    /// Someone else does its work for now (waiting callers poll the receive
    /// side): after an idle iteration it sleeps at once instead of idling
    /// through the parking phases beside them.
    fn covered(&self) -> bool {
        false
    }
}

/// What arming an agent's own wake-ups gave ([`Sleeper::arm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Armed {
    /// Its completion queue is armed: this descriptor becomes readable.
    Watch(RawFd),
    /// Nothing to arm: the doorbell alone wakes it.
    Doorbell,
    /// It cannot promise a wake-up now: keep polling.
    NotNow,
}

/// The parts of an agent's sleep, so that one thread can sleep for several
/// agents that share one doorbell ([`sleep_together`]).
pub(crate) trait Sleeper {
    /// The doorbell its wakers ring.
    fn doorbell(&self) -> &Arc<Doorbell>;
    /// Before the doorbell is announced: false if it must not block now.
    fn may_sleep(&self) -> bool {
        true
    }
    /// After the announce, before the last look: arms what besides the
    /// doorbell can wake it (a completion queue).
    fn arm(&mut self) -> Armed;
    /// The last look for work, after arming (0: none, it may block).
    fn last_look(&mut self) -> usize;
    /// After blocking: consumes the queue's wake-up if `watched`, counts the sleep.
    fn woke(&mut self, watched: bool);
    /// The longest it may block (asked after `arm`): [`SLEEP_TIMEOUT`],
    /// less where some of its work can come without a wake-up.
    fn sleep_bound(&self) -> Duration {
        SLEEP_TIMEOUT
    }
    /// One more descriptor whose readability wakes it (asked after `arm`),
    /// made readable and consumed by someone else (the ring watch's fault
    /// queue): waiting on it directly saves the hand-off through the doorbell.
    fn wake_fd(&self) -> Option<RawFd> {
        None
    }
}

/// Sleeps for all of `agents` on their one doorbell (`sys::doorbell`):
/// announce once, arm each, give each its last look, and block only if none
/// found work, woken by the doorbell or any armed queue.
///
/// No wake-up is lost, for one agent as for several: every agent's wakers
/// (Java's new data, connection changes, returned buffers) ring the same
/// doorbell, whose word is announced (store, full fence) before any arming
/// and last look; a waker publishes, fences, then reads that word. So either
/// the waker sees the 1 and rings (the eventfd keeps the ring until the
/// wait), or the last look of the agent it woke, which comes after the
/// announce, sees its work. A completion queue is armed before its agent's
/// last look and its descriptor is in the wait. The agents must share one
/// doorbell: a second one would be announced and waited on by nobody.
pub(crate) fn sleep_together(agents: &mut [&mut dyn Sleeper]) -> Sleep {
    let Some(first) = agents.first() else {
        return Sleep::NotNow;
    };
    let door = first.doorbell().clone();
    debug_assert!(agents.iter().all(|a| Arc::ptr_eq(a.doorbell(), &door)), "agents sleeping together share a doorbell");
    if !agents.iter().all(|a| a.may_sleep()) {
        return Sleep::NotNow;
    }
    door.announce();
    // The doorbell's wait watches up to 3 descriptors besides its own.
    let mut fds = [0 as RawFd; 3];
    let mut n = 0;
    let mut watched = 0u32; // bit i: agent i's queue is armed
    for (i, a) in agents.iter_mut().enumerate() {
        match a.arm() {
            Armed::Watch(fd) if n < fds.len() => {
                fds[n] = fd;
                n += 1;
                watched |= 1 << i;
            }
            Armed::Watch(_) | Armed::NotNow => {
                door.retract();
                return Sleep::NotNow;
            }
            Armed::Doorbell => {}
        }
    }
    for fd in agents.iter().filter_map(|a| a.wake_fd()) {
        if n == fds.len() {
            door.retract();
            return Sleep::NotNow;
        }
        fds[n] = fd;
        n += 1;
    }
    let work: usize = agents.iter_mut().map(|a| a.last_look()).sum();
    if work > 0 {
        door.retract();
        return Sleep::FoundWork(work);
    }
    let bound = agents.iter().map(|a| a.sleep_bound()).min().unwrap_or(SLEEP_TIMEOUT);
    let woken = match door.wait(&fds[..n], bound) {
        Ok(w) => w.rung || w.ready != 0,
        Err(e) => {
            log::error!(
                "{}: an engine thread could not sleep: {e}",
                std::thread::current().name().unwrap_or("ibdxnet")
            );
            false
        }
    };
    door.retract();
    for (i, a) in agents.iter_mut().enumerate() {
        a.woke(watched & (1 << i) != 0);
    }
    Sleep::Slept(woken)
}

/// The one engine thread of `engine_threads=shared`: each iteration the send
/// work, then the receive work (the sum is the iteration's work); it sleeps
/// only when both are idle, on the doorbell both share, woken by anything
/// that would wake either ([`sleep_together`]).
pub(crate) struct Both<S, R> {
    /// The send agent.
    pub send: S,
    /// The receive agent.
    pub recv: R,
}

impl<S: Agent + Sleeper, R: Agent + Sleeper> Agent for Both<S, R> {
    fn do_work(&mut self) -> usize {
        self.send.do_work() + self.recv.do_work()
    }

    fn sleep(&mut self) -> Sleep {
        sleep_together(&mut [&mut self.send, &mut self.recv])
    }
}

/// The loop of the send and receive threads: work, then idle by the amount
/// of work done (busy, yield, park, sleep), until the engine stops. Each of
/// `iterations` counts every iteration (the shared thread counts both the
/// send and the receive iterations).
pub(crate) fn agent_loop<A: Agent>(
    running: &AtomicBool,
    parking: ParkingConfig,
    agent: &mut A,
    iterations: &[&AtomicU64],
) {
    let publish = |count: u64| {
        for it in iterations {
            it.store(count, Ordering::Relaxed);
        }
    };
    let mut park = Parking::new(parking);
    // Counted here and published now and then (and before every sleep): the
    // two threads' counters share a cache line, which a store per iteration
    // would bounce between them.
    let mut count = 0u64;
    while running.load(Ordering::Acquire) {
        count += 1;
        if count % 1024 == 0 {
            publish(count);
        }
        let work = agent.do_work();
        if park.idle(work) || (work == 0 && agent.covered()) {
            publish(count);
            match agent.sleep() {
                Sleep::Slept(false) => {}
                // Whatever woke it may be followed by more (a write watch
                // rings at a message's first byte, before it is published):
                // poll for a while before sleeping again.
                Sleep::Slept(true) => park.rewind(),
                Sleep::FoundWork(n) => {
                    park.idle(n);
                }
                Sleep::NotNow => park.nap(),
            }
        }
    }
    publish(count);
}
