//! What the send and receive threads have in common: the idle loop that
//! drives them (work, then busy/yield/park/sleep by the amount of work,
//! paper §7.2.5) and the sleep contract each implements. Apart from
//! `engine` so that the threads' modules and the module that starts them do
//! not use each other.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::sys::parking::{Parking, ParkingConfig};

/// The longest an engine thread sleeps without being woken: a safety net
/// (every event that needs a thread wakes it: completions, Java's doorbell,
/// connection changes, returned buffers). Each look costs tens of µs, so
/// 10 looks a second keep an idle node's engine under 0.1 % of a core.
pub(crate) const SLEEP_TIMEOUT: Duration = Duration::from_millis(100);

/// How an attempt to sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sleep {
    /// Blocked until woken or the timeout.
    Slept,
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
}

/// The loop of the send and receive threads: work, then idle by the amount
/// of work done (busy, yield, park, sleep), until the engine stops.
pub(crate) fn agent_loop<A: Agent>(
    running: &AtomicBool,
    parking: ParkingConfig,
    agent: &mut A,
    iterations: &AtomicU64,
) {
    let mut park = Parking::new(parking);
    // Counted here and published now and then (and before every sleep): the
    // two threads' counters share a cache line, which a store per iteration
    // would bounce between them.
    let mut count = 0u64;
    while running.load(Ordering::Acquire) {
        count += 1;
        if count % 1024 == 0 {
            iterations.store(count, Ordering::Relaxed);
        }
        if park.idle(agent.do_work()) {
            iterations.store(count, Ordering::Relaxed);
            match agent.sleep() {
                Sleep::Slept => {}
                Sleep::FoundWork(n) => {
                    park.idle(n);
                }
                Sleep::NotNow => park.nap(),
            }
        }
    }
    iterations.store(count, Ordering::Relaxed);
}
