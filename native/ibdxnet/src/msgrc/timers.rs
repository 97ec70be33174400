//! Operation timers of the send and receive threads (the runtime statistics
//! of upstream's §7, `stats::Time`): per operation a count, a total, the
//! best and the worst duration and a histogram of 64 buckets from which
//! percentiles are read.
//!
//! Cost: a [`Timer`] is written by one thread only (the engine thread whose
//! operation it times), so a sample is a handful of relaxed loads and stores
//! to its own cache lines, no read-modify-write instruction; readers (the
//! statistics map, the print thread) take relaxed loads and may see a sample
//! half recorded, which moves a figure by at most one sample. Each
//! operation is timed once per call, and the engine calls each at most once
//! per loop iteration (a post carries a whole chain of work requests, a poll
//! a batch of completions), so the clock is read per iteration, not per WR.
//!
//! Buckets: two per power of two (relative width ≤ 50 %), durations 0 and 1
//! ns in buckets of their own, everything from 3 × 2^30 ns (3.2 s) up in
//! the last. A percentile is the upper bound of the bucket holding its rank,
//! clamped into `[best, worst]`: within the bucket's width of the truth, and
//! exact where all samples are equal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Buckets of a timer's histogram.
pub const BUCKETS: usize = 64;

/// The bucket of a duration of `ns` nanoseconds.
pub fn bucket(ns: u64) -> usize {
    if ns < 2 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize; // ≥ 1
    let half = ((ns >> (e - 1)) & 1) as usize;
    (2 + (e - 1) * 2 + half).min(BUCKETS - 1)
}

/// The largest duration bucket `i` holds (`u64::MAX` for the last).
pub fn bucket_upper(i: usize) -> u64 {
    if i < 2 {
        return i as u64;
    }
    if i >= BUCKETS - 1 {
        return u64::MAX;
    }
    let e = (i - 2) / 2 + 1;
    let half = ((i - 2) % 2) as u64;
    let low = (1u64 << e) + half * (1u64 << (e - 1));
    low + (1u64 << (e - 1)) - 1
}

/// One operation's timer. Written by one thread only ([`Timer::record`]);
/// read by any. Aligned to a cache line so that the send thread's timers and
/// the receive thread's never share one.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Timer {
    count: AtomicU64,
    total_ns: AtomicU64,
    min_ns: AtomicU64,
    max_ns: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl Default for Timer {
    fn default() -> Self {
        Timer {
            count: AtomicU64::new(0),
            total_ns: AtomicU64::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            max_ns: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Adds `n` to a counter that only the calling thread writes: a load and a
/// store, not a locked read-modify-write.
#[inline]
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Timer {
    /// Records one sample of `ns` nanoseconds. Only one thread may record
    /// into a timer (two would lose samples, nothing worse).
    #[inline]
    pub fn record(&self, ns: u64) {
        bump(&self.buckets[bucket(ns)], 1);
        bump(&self.total_ns, ns);
        if ns < self.min_ns.load(Ordering::Relaxed) {
            self.min_ns.store(ns, Ordering::Relaxed);
        }
        if ns > self.max_ns.load(Ordering::Relaxed) {
            self.max_ns.store(ns, Ordering::Relaxed);
        }
        bump(&self.count, 1);
    }

    /// Records the time since `start`, if the clock was on ([`Clock::start`]).
    #[inline]
    pub fn record_since(&self, start: Option<Instant>) {
        if let Some(t) = start {
            self.record(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
    }

    /// The timer's figures now.
    pub fn snapshot(&self) -> TimerSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TimerSnapshot {
            count: l(&self.count),
            total_ns: l(&self.total_ns),
            min_ns: l(&self.min_ns),
            max_ns: l(&self.max_ns),
            buckets: std::array::from_fn(|i| l(&self.buckets[i])),
        }
    }
}

/// Whether the engine threads time their operations (`stats_timers`): the
/// start of a timed operation, or `None` with the clock off.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// On: read the clock.
    pub on: bool,
}

impl Clock {
    /// The start of an operation (`None` when off: nothing is recorded).
    #[inline]
    pub fn start(self) -> Option<Instant> {
        if self.on {
            Some(Instant::now())
        } else {
            None
        }
    }
}

/// A copy of a timer's figures, read without stopping its writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerSnapshot {
    /// Samples.
    pub count: u64,
    /// Sum of the samples, ns.
    pub total_ns: u64,
    /// Best sample, ns (`u64::MAX` before the first).
    pub min_ns: u64,
    /// Worst sample, ns.
    pub max_ns: u64,
    /// Samples per bucket ([`bucket`]).
    pub buckets: [u64; BUCKETS],
}

impl TimerSnapshot {
    /// Best sample, 0 before the first.
    pub fn min(&self) -> u64 {
        if self.count == 0 || self.min_ns > self.max_ns {
            0
        } else {
            self.min_ns
        }
    }

    /// Mean, ns (0 before the first sample), clamped into `[min, max]`: a
    /// snapshot taken while a sample is recorded may pair the new total
    /// with the old count.
    pub fn avg(&self) -> u64 {
        match self.total_ns.checked_div(self.count) {
            Some(a) => a.clamp(self.min(), self.max_ns.max(self.min())),
            None => 0,
        }
    }

    /// The duration `per_mille`/1000 of the samples do not exceed (500:
    /// median, 999: p99.9), to the histogram's resolution, clamped into
    /// `[min, max]`; 0 without samples.
    pub fn percentile(&self, per_mille: u64) -> u64 {
        let n: u64 = self.buckets.iter().sum();
        if n == 0 {
            return 0;
        }
        let rank = (u128::from(n) * u128::from(per_mille.min(1000))).div_ceil(1000).max(1);
        let mut seen = 0u128;
        let mut at = BUCKETS - 1;
        for (i, &b) in self.buckets.iter().enumerate() {
            seen += u128::from(b);
            if seen >= rank {
                at = i;
                break;
            }
        }
        let (lo, hi) = (self.min(), self.max_ns.max(self.min()));
        bucket_upper(at).clamp(lo, hi)
    }

    /// The figures by the suffixes of [`super::stats::TIMER_FIGURES`].
    pub fn figures(&self) -> [u64; 9] {
        [
            self.count,
            self.total_ns,
            self.min(),
            self.max_ns,
            self.avg(),
            self.percentile(500),
            self.percentile(900),
            self.percentile(990),
            self.percentile(999),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_ordered() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 1);
        assert_eq!(
            (bucket(2), bucket(3), bucket(4), bucket(5), bucket(6), bucket(7), bucket(8)),
            (2, 3, 4, 4, 5, 5, 6)
        );
        for i in 0..BUCKETS - 1 {
            let up = bucket_upper(i);
            assert_eq!(bucket(up), i, "upper bound of {i}");
            assert_eq!(bucket(up + 1), i + 1, "next after {i}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_upper(BUCKETS - 2) + 1, 3 << 30, "the last bucket starts at 3 × 2^30 ns");
    }

    #[test]
    fn count_total_min_max_avg() {
        let t = Timer::default();
        let s = t.snapshot();
        assert_eq!((s.count, s.min(), s.max_ns, s.avg(), s.percentile(500)), (0, 0, 0, 0, 0));
        for ns in [100, 50, 400, 250] {
            t.record(ns);
        }
        let s = t.snapshot();
        assert_eq!((s.count, s.total_ns, s.min(), s.max_ns, s.avg()), (4, 800, 50, 400, 200));
    }

    #[test]
    fn equal_samples_give_exact_percentiles() {
        let t = Timer::default();
        for _ in 0..1000 {
            t.record(1234);
        }
        let s = t.snapshot();
        for q in [500, 900, 990, 999, 1000] {
            assert_eq!(s.percentile(q), 1234, "p{q}");
        }
    }

    #[test]
    fn percentiles_of_known_samples_within_a_bucket() {
        // 1..=10000 ns once each: the true p50 is 5000, p90 9000, p99 9900, p99.9 9990.
        let t = Timer::default();
        for ns in 1..=10_000u64 {
            t.record(ns);
        }
        let s = t.snapshot();
        for (q, truth) in [(500, 5000u64), (900, 9000), (990, 9900), (999, 9990)] {
            let p = s.percentile(q);
            // The bucket's upper bound: not below the truth, and within the
            // bucket's width (≤ 50 % of its lower bound) above it.
            assert!(p >= truth && p <= truth + truth / 2, "p{q} = {p}, truth {truth}");
            assert_eq!(bucket(p), bucket(truth), "p{q} lies in the truth's bucket");
        }
        assert_eq!(s.percentile(1000), 10_000, "p100 is the worst");
        // A bimodal set: 90 fast, 10 slow.
        let t = Timer::default();
        (0..90).for_each(|_| t.record(100));
        (0..10).for_each(|_| t.record(1_000_000));
        let s = t.snapshot();
        assert_eq!(bucket(s.percentile(500)), bucket(100));
        assert_eq!(bucket(s.percentile(900)), bucket(100));
        assert_eq!(s.percentile(910), bucket_upper(bucket(1_000_000)).min(1_000_000));
        assert_eq!(s.percentile(999), 1_000_000);
    }

    #[test]
    fn huge_samples_land_in_the_last_bucket() {
        let t = Timer::default();
        t.record(u64::MAX / 2);
        let s = t.snapshot();
        assert_eq!(s.buckets[BUCKETS - 1], 1);
        assert_eq!(s.percentile(500), u64::MAX / 2);
    }

    #[test]
    fn clock_off_records_nothing() {
        let t = Timer::default();
        t.record_since(Clock { on: false }.start());
        assert_eq!(t.snapshot().count, 0);
        t.record_since(Clock { on: true }.start());
        assert_eq!(t.snapshot().count, 1);
    }

    /// One writer records while a reader takes snapshots: every snapshot is
    /// sane (monotonic count, ordered percentiles inside `[min, max]`, the
    /// total within the count's bounds), and the last one is exact.
    #[test]
    fn concurrent_reader_sees_sane_figures() {
        let t = std::sync::Arc::new(Timer::default());
        let n = 2_000_000u64;
        let w = {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..n {
                    t.record(10 + (i * 7919) % 100_000);
                }
            })
        };
        let mut last = 0;
        let mut reads = 0;
        while !w.is_finished() || reads == 0 {
            let s = t.snapshot();
            reads += 1;
            assert!(s.count >= last, "count went back");
            last = s.count;
            if s.count == 0 {
                continue;
            }
            let p = [s.percentile(500), s.percentile(900), s.percentile(990), s.percentile(999)];
            assert!(p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");
            assert!(s.min() <= p[0] && p[3] <= s.max_ns, "{p:?} outside [{}, {}]", s.min(), s.max_ns);
            assert!(s.min() >= 10 && s.max_ns < 10 + 100_000);
            // count and total are read at slightly different moments: allow one
            // sample's slack either way.
            assert!(s.total_ns + 100_010 >= s.count * 10, "total below count × min");
            assert!(s.total_ns <= (s.count + 1) * 100_010, "total above count × max");
        }
        w.join().unwrap();
        let s = t.snapshot();
        assert_eq!(s.count, n);
        assert_eq!(s.buckets.iter().sum::<u64>(), n);
        assert!(reads > 1, "the reader ran alongside the writer");
    }
}
