//! Load adaptive thread parking (paper §7.2.5): busy-poll while there is
//! work; after `yield_after` without work, yield on every idle iteration;
//! after `park_after`, sleep `park_for` per idle iteration. Any work resets
//! it to busy polling.
//!
//! The shortest sleep is bounded by the kernel's timer slack (50 µs by
//! default for normal threads on Linux), so a parked thread reacts within
//! about that; the wake-up latency of each phase is measured by the
//! `parking` benchmark in the loopback tool (`--measure-parking`).

use std::time::{Duration, Instant};

/// Parking thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkingConfig {
    /// Idle time before yielding (paper: 100 ms).
    pub yield_after: Duration,
    /// Idle time before sleeping (paper: 1 s).
    pub park_after: Duration,
    /// Sleep per idle iteration once parked (paper: 1 ns, i.e. the minimum).
    pub park_for: Duration,
}

impl Default for ParkingConfig {
    fn default() -> Self {
        ParkingConfig {
            yield_after: Duration::from_millis(100),
            park_after: Duration::from_secs(1),
            park_for: Duration::from_nanos(1),
        }
    }
}

/// The phase a parking thread is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Busy polling.
    Busy,
    /// Yielding on idle iterations.
    Yield,
    /// Sleeping on idle iterations.
    Park,
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

    /// Call once per loop iteration with the work it did.
    pub fn idle(&mut self, work: usize) {
        if work > 0 {
            self.idle_since = None;
            self.phase = Phase::Busy;
            return;
        }
        let now = Instant::now();
        let since = *self.idle_since.get_or_insert(now);
        let idle = now - since;
        self.phase = if idle >= self.cfg.park_after {
            Phase::Park
        } else if idle >= self.cfg.yield_after {
            Phase::Yield
        } else {
            Phase::Busy
        };
        match self.phase {
            Phase::Busy => std::hint::spin_loop(),
            Phase::Yield => std::thread::yield_now(),
            Phase::Park => std::thread::sleep(self.cfg.park_for),
        }
    }
}

/// Measures how long a thread idling in `phase` takes to notice new work:
/// `samples` wake-ups, each after `gap` of idleness. Returns the latencies
/// in nanoseconds, sorted.
pub fn measure_wakeup(phase: Phase, samples: usize, gap: Duration) -> Vec<u64> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let long = Duration::from_secs(3600);
    let cfg = match phase {
        Phase::Busy => ParkingConfig { yield_after: long, park_after: long, ..Default::default() },
        Phase::Yield => ParkingConfig { yield_after: Duration::ZERO, park_after: long, ..Default::default() },
        Phase::Park => ParkingConfig { yield_after: Duration::ZERO, park_after: Duration::ZERO, ..Default::default() },
    };
    let base = Instant::now();
    // Work item: the time it was posted (ns since `base`), 0 = none.
    let posted = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicU64::new(0));
    let waiter = {
        let (posted, seen, stop) = (posted.clone(), seen.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut park = Parking::new(cfg);
            let mut lat = Vec::with_capacity(samples);
            while stop.load(Ordering::Acquire) == 0 {
                let t = posted.swap(0, Ordering::AcqRel);
                if t != 0 {
                    lat.push(base.elapsed().as_nanos() as u64 - t);
                    seen.fetch_add(1, Ordering::Release);
                }
                park.idle(usize::from(t != 0));
            }
            lat
        })
    };
    for i in 0..samples {
        std::thread::sleep(gap);
        posted.store((base.elapsed().as_nanos() as u64).max(1), Ordering::Release);
        while seen.load(Ordering::Acquire) <= i as u64 {
            std::hint::spin_loop();
        }
    }
    stop.store(1, Ordering::Release);
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
        };
        let mut p = Parking::new(cfg);
        // Before the first idle call, which starts the idle time: taken after
        // it, a preemption in between (seen in the emulated VM) makes the
        // idle time longer than t0.elapsed() and the bounds below fail.
        let t0 = Instant::now();
        p.idle(0);
        assert_eq!(p.phase(), Phase::Busy);
        while p.phase() != Phase::Yield {
            p.idle(0);
            assert!(t0.elapsed() < Duration::from_secs(5));
        }
        assert!(t0.elapsed() >= Duration::from_millis(5));
        while p.phase() != Phase::Park {
            p.idle(0);
        }
        assert!(t0.elapsed() >= Duration::from_millis(15));
        p.idle(3);
        assert_eq!(p.phase(), Phase::Busy);
        p.idle(0);
        assert_eq!(p.phase(), Phase::Busy, "idle time restarts after work");
    }
}
