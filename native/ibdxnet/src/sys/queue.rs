//! A bounded lock-free multi-producer multi-consumer queue of `u32` values
//! (Dmitry Vyukov's bounded MPMC queue: every slot carries a sequence number
//! that tells producers and consumers whose turn it is).
//!
//! Used for the receive buffer pool's free list (buffers come back from any
//! thread) and the connection manager's job queue.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

struct Slot {
    seq: AtomicUsize,
    value: AtomicU32,
}

/// Bounded MPMC queue of `u32`.
pub struct IndexQueue {
    slots: Box<[Slot]>,
    mask: usize,
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
}

impl std::fmt::Debug for IndexQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IndexQueue(capacity {}, len ~{})", self.capacity(), self.len())
    }
}

impl IndexQueue {
    /// A queue holding at least `capacity` values (rounded up to a power of two).
    ///
    /// ```
    /// use ibdxnet::sys::queue::IndexQueue;
    /// let q = IndexQueue::new(3);
    /// assert_eq!(q.capacity(), 4);
    /// q.push(7).unwrap();
    /// assert_eq!(q.pop(), Some(7));
    /// assert_eq!(q.pop(), None);
    /// ```
    pub fn new(capacity: usize) -> IndexQueue {
        let cap = capacity.max(2).next_power_of_two();
        let slots = (0..cap).map(|i| Slot { seq: AtomicUsize::new(i), value: AtomicU32::new(0) }).collect();
        IndexQueue {
            slots,
            mask: cap - 1,
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// Slots.
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Approximate number of values (exact when no one pushes or pops).
    pub fn len(&self) -> usize {
        let t = self.tail.load(Ordering::Acquire);
        let h = self.head.load(Ordering::Acquire);
        t.saturating_sub(h)
    }

    /// True if approximately empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `v`; gives it back if the queue is full. "Full" includes the
    /// moment a pop on another thread has claimed the slot `v` would go to
    /// but not yet released it: a queue holding fewer values than its
    /// capacity can refuse a push briefly under contention.
    pub fn push(&self, v: u32) -> Result<(), u32> {
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Ordering::Acquire);
            let diff = seq as isize - pos as isize;
            if diff == 0 {
                match self.tail.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        slot.value.store(v, Ordering::Relaxed);
                        // Publish: the consumer's Acquire on `seq` sees `value`.
                        slot.seq.store(pos + 1, Ordering::Release);
                        return Ok(());
                    }
                    Err(now) => pos = now,
                }
            } else if diff < 0 {
                return Err(v);
            } else {
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Removes the oldest value.
    pub fn pop(&self) -> Option<u32> {
        let mut pos = self.head.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Ordering::Acquire);
            let diff = seq as isize - (pos + 1) as isize;
            if diff == 0 {
                match self.head.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        let v = slot.value.load(Ordering::Relaxed);
                        // Hand the slot back to producers one lap later.
                        slot.seq.store(pos + self.mask + 1, Ordering::Release);
                        return Some(v);
                    }
                    Err(now) => pos = now,
                }
            } else if diff < 0 {
                return None;
            } else {
                pos = self.head.load(Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_and_bounded() {
        let q = IndexQueue::new(4);
        for i in 0..4 {
            q.push(i).unwrap();
        }
        assert_eq!(q.push(9), Err(9));
        assert_eq!(q.len(), 4);
        assert_eq!((0..4).map(|_| q.pop().unwrap()).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(q.pop(), None);
        // Wraps around many laps.
        for i in 0..1000 {
            q.push(i).unwrap();
            assert_eq!(q.pop(), Some(i));
        }
    }

    /// Stress: 4 producers and 2 consumers move 4 × 200 000 distinct values;
    /// every value arrives exactly once and each producer's values in order.
    #[test]
    fn stress_many_producers_many_consumers() {
        let per = if cfg!(miri) { 200 } else { 200_000u32 };
        let producers = 4u32;
        let q = Arc::new(IndexQueue::new(64));
        let mut handles = Vec::new();
        for p in 0..producers {
            let q = q.clone();
            handles.push(std::thread::spawn(move || {
                for i in 0..per {
                    let mut v = (p << 24) | i;
                    while let Err(back) = q.push(v) {
                        v = back;
                        std::thread::yield_now();
                    }
                }
                Vec::new()
            }));
        }
        let total = (per * producers) as usize;
        let taken = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let (q, taken) = (q.clone(), taken.clone());
            handles.push(std::thread::spawn(move || {
                let mut got = Vec::new();
                while taken.load(Ordering::Relaxed) < total {
                    match q.pop() {
                        Some(v) => {
                            got.push(v);
                            taken.fetch_add(1, Ordering::Relaxed);
                        }
                        None => std::thread::yield_now(),
                    }
                }
                got
            }));
        }
        let mut per_consumer: Vec<Vec<u32>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let all: Vec<u32> = per_consumer.iter().flatten().copied().collect();
        assert_eq!(all.len(), total);
        // Per consumer, each producer's values are increasing (FIFO per producer).
        for got in &mut per_consumer {
            let mut last = vec![None::<u32>; producers as usize];
            for v in got.iter() {
                let (p, i) = ((v >> 24) as usize, v & 0xFF_FFFF);
                assert!(last[p].is_none_or(|l| l < i), "producer {p} out of order");
                last[p] = Some(i);
            }
        }
        let mut sorted = all;
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), total, "a value was duplicated or lost");
        assert!(q.is_empty());
    }
}
