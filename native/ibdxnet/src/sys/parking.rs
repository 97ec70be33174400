//! Load adaptive thread parking (paper §7.2.5): busy-poll while there is
//! work; after `yield_after` without work, yield on every idle iteration;
//! after `park_after`, sleep `park_for` per idle iteration. Any work resets
//! it to busy polling. Beyond the paper, after `sleep_after` the thread
//! blocks until an event wakes it ([`Phase::Sleep`]: the caller sleeps on its
//! doorbell and completion queue, see `sys::doorbell`); `None` never sleeps
//! (the paper's polling).
//!
//! The shortest sleep is bounded by the kernel's timer slack (50 µs by
//! default for normal threads on Linux), so a parked thread reacts within
//! about that; the wake-up latency of each phase is measured by the
//! `parking` benchmark in the loopback tool (`--measure-parking`).

use std::time::{Duration, Instant};

/// Parking thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkingConfig {
    /// Idle time before yielding (paper: 100 ms; default 0: spinning pays
    /// only with a free core per engine thread, see `DEFAULT_SLEEP_AFTER_US`).
    pub yield_after: Duration,
    /// Idle time before sleeping (paper: 1 s).
    pub park_after: Duration,
    /// Sleep per idle iteration once parked (paper: 1 ns, i.e. the minimum).
    pub park_for: Duration,
    /// Idle time before blocking on events (`None`: never).
    pub sleep_after: Option<Duration>,
}

impl Default for ParkingConfig {
    fn default() -> Self {
        ParkingConfig {
            yield_after: Duration::ZERO,
            park_after: Duration::from_secs(1),
            park_for: Duration::from_nanos(1),
            sleep_after: Some(Duration::from_micros(DEFAULT_SLEEP_AFTER_US)),
        }
    }
}

/// Default idle time before an engine thread blocks on events, µs: long
/// enough to catch the next message of a busy stream without a wake-up,
/// short enough that an idle node costs next to nothing.
pub const DEFAULT_SLEEP_AFTER_US: u64 = 1000;

/// The phase a parking thread is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Busy polling.
    Busy,
    /// Yielding on idle iterations.
    Yield,
    /// Sleeping on idle iterations.
    Park,
    /// Blocking until woken (the caller does it).
    Sleep,
}

/// Per-thread idle strategy state.
#[derive(Debug)]
pub struct Parking {
    cfg: ParkingConfig,
    idle_since: Option<Instant>,
    phase: Phase,
}

impl Parking {
    /// Starts busy.
    pub fn new(cfg: ParkingConfig) -> Self {
        Parking { cfg, idle_since: None, phase: Phase::Busy }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Call once per loop iteration with the work it did. Idles as the phase
    /// says; true in [`Phase::Sleep`], where the caller blocks on its events.
    pub fn idle(&mut self, work: usize) -> bool {
        if work > 0 {
            self.idle_since = None;
            self.phase = Phase::Busy;
            return false;
        }
        let now = Instant::now();
        let since = *self.idle_since.get_or_insert(now);
        let idle = now - since;
        self.phase = if self.cfg.sleep_after.is_some_and(|s| idle >= s) {
            Phase::Sleep
        } else if idle >= self.cfg.park_after {
            Phase::Park
        } else if idle >= self.cfg.yield_after {
            Phase::Yield
        } else {
            Phase::Busy
        };
        match self.phase {
            Phase::Busy => std::hint::spin_loop(),
            Phase::Yield => std::thread::yield_now(),
            Phase::Park => self.nap(),
            Phase::Sleep => return true,
        }
        false
    }

    /// Counts idleness from now (after a wake-up): busy, then yield, again.
    pub fn rewind(&mut self) {
        self.idle_since = Some(Instant::now());
        self.phase = Phase::Busy;
    }

    /// One idle iteration of the park phase (also where blocking is not
    /// possible right now).
    pub fn nap(&self) {
        std::thread::sleep(self.cfg.park_for);
    }
}

/// Measures how long a thread idling in `phase` takes to notice new work:
/// `samples` wake-ups, each after `gap` of idleness. Returns the latencies
/// in nanoseconds, sorted.
pub fn measure_wakeup(phase: Phase, samples: usize, gap: Duration) -> Vec<u64> {
    use crate::sys::doorbell::Doorbell;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let long = Duration::from_secs(3600);
    let never = ParkingConfig { yield_after: long, park_after: long, sleep_after: None, ..Default::default() };
    let cfg = match phase {
        Phase::Busy => never,
        Phase::Yield => ParkingConfig { yield_after: Duration::ZERO, ..never },
        Phase::Park => ParkingConfig { yield_after: Duration::ZERO, park_after: Duration::ZERO, ..never },
        Phase::Sleep => ParkingConfig { sleep_after: Some(Duration::ZERO), ..never },
    };
    let base = Instant::now();
    // Work item: the time it was posted (ns since `base`), 0 = none.
    let posted = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicU64::new(0));
    let door = Arc::new(Doorbell::new().expect("eventfd"));
    let waiter = {
        let (posted, seen, stop, door) = (posted.clone(), seen.clone(), stop.clone(), door.clone());
        std::thread::spawn(move || {
            let mut park = Parking::new(cfg);
            let mut lat = Vec::with_capacity(samples);
            while stop.load(Ordering::Acquire) == 0 {
                let t = posted.swap(0, Ordering::AcqRel);
                if t != 0 {
                    lat.push(base.elapsed().as_nanos() as u64 - t);
                    seen.fetch_add(1, Ordering::Release);
                }
                if park.idle(usize::from(t != 0)) {
                    door.announce();
                    if posted.load(Ordering::Acquire) == 0 && stop.load(Ordering::Acquire) == 0 {
                        let _ = door.wait(&[], Duration::from_secs(1)); // a timeout just loops
                    }
                    door.retract();
                }
            }
            lat
        })
    };
    for i in 0..samples {
        std::thread::sleep(gap);
        posted.store((base.elapsed().as_nanos() as u64).max(1), Ordering::Release);
        door.wake_if_sleeping();
        while seen.load(Ordering::Acquire) <= i as u64 {
            std::hint::spin_loop();
        }
    }
    stop.store(1, Ordering::Release);
    door.ring();
    let mut lat = waiter.join().unwrap_or_default();
    lat.sort_unstable();
    lat
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_idle_time_and_work_resets() {
        let cfg = ParkingConfig {
            yield_after: Duration::from_millis(5),
            park_after: Duration::from_millis(15),
            park_for: Duration::from_nanos(1),
            sleep_after: Some(Duration::from_millis(25)),
        };
        let mut p = Parking::new(cfg);
        // Before the first idle call, which starts the idle time: taken after
        // it, a preemption in between (seen in the emulated VM) makes the
        // idle time longer than t0.elapsed() and the bounds below fail.
        let t0 = Instant::now();
        let rank = |ph: Phase| [Phase::Busy, Phase::Yield, Phase::Park, Phase::Sleep].iter().position(|&x| x == ph);
        // Phases only advance, each not before its threshold; a preemption
        // longer than a threshold may skip one (seen on a loaded machine).
        let mut last = Phase::Busy;
        while !p.idle(0) {
            let (ph, at) = (p.phase(), t0.elapsed());
            assert!(rank(ph) >= rank(last), "{last:?} → {ph:?}");
            assert!(at < Duration::from_secs(5));
            last = ph;
            match ph {
                Phase::Yield => assert!(at >= Duration::from_millis(5)),
                Phase::Park => assert!(at >= Duration::from_millis(15)),
                _ => {}
            }
        }
        assert_eq!(p.phase(), Phase::Sleep);
        assert!(t0.elapsed() >= Duration::from_millis(25));
        p.idle(3);
        assert_eq!(p.phase(), Phase::Busy);
        p.idle(0);
        assert_eq!(p.phase(), Phase::Busy, "idle time restarts after work");
    }
}
