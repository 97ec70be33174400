//! Invariant-checking stress tests of the lock-free and shared structures:
//! the MPMC index queue (no value lost or duplicated, FIFO per producer as
//! seen by each consumer, never more than its capacity), the receive buffer
//! pool's return path (a buffer is never handed out twice, a racing double
//! return succeeds once) and the incoming ring (checked against a model).
//!
//! Not loom: the queue and the pool use `std` atomics and crossbeam's
//! padding directly, and the pool needs a registered region from a fabric;
//! a loom model would need an atomics indirection in the production code.
//! The ring has no concurrency to model: only the receive thread touches it
//! (the user reads it inside the `received` up-call on that thread).
//! Each test is bounded by a wall-clock budget (about 2 s) rather than
//! by an iteration count, so slow machines and valgrind stay fast.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{Fabric, FabricConfig, SimOptions};
use ibdxnet::msgrc::recv_pool::{RecvPool, ReturnError};
use ibdxnet::msgrc::{IncomingEntry, IncomingRing};
use ibdxnet::sys::queue::IndexQueue;

const BUDGET: Duration = Duration::from_secs(2);

/// Every thread both pushes its own numbered values and pops whatever
/// comes; a tiny capacity keeps the queue at full and empty and wraps the
/// slots' sequence numbers constantly.
fn queue_round(capacity: usize, threads: u32) -> u64 {
    let q = Arc::new(IndexQueue::new(capacity));
    let cap = q.capacity();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (q, stop, start) = (q.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut next = 0u32;
                let mut got: Vec<u32> = Vec::new();
                let mut last = vec![None::<u32>; threads as usize];
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) || next == 0 {
                    k += 1;
                    if k % 3 != 0 && next < 0x00FF_FFFF {
                        if q.push((t << 24) | next).is_ok() {
                            next += 1;
                        }
                    } else if let Some(v) = q.pop() {
                        let (p, i) = ((v >> 24) as usize, v & 0x00FF_FFFF);
                        assert!(last[p].is_none_or(|l| l < i), "producer {p}: {i} after {:?}", last[p]);
                        last[p] = Some(i);
                        got.push(v);
                    }
                    assert!(q.len() <= cap, "len {} > capacity {cap}", q.len());
                    if k % 64 == 0 {
                        std::thread::yield_now();
                    }
                }
                (next, got)
            })
        })
        .collect();
    std::thread::sleep(BUDGET / 4);
    stop.store(true, Ordering::Relaxed);
    let mut pushed = vec![0u32; threads as usize];
    let mut all = Vec::new();
    for (t, h) in handles.into_iter().enumerate() {
        let (n, got) = h.join().unwrap();
        pushed[t] = n;
        all.extend(got);
    }
    while let Some(v) = q.pop() {
        all.push(v);
    }
    let total: u64 = pushed.iter().map(|&n| u64::from(n)).sum();
    assert_eq!(all.len() as u64, total, "values lost or duplicated");
    all.sort_unstable();
    let expected: Vec<u32> = (0..threads).flat_map(|t| (0..pushed[t as usize]).map(move |i| (t << 24) | i)).collect();
    assert_eq!(all, expected, "every pushed value exactly once");
    total
}

#[test]
fn queue_conserves_values_and_keeps_producer_order_under_contention() {
    let mut moved = 0;
    for (capacity, threads) in [(2, 4), (4, 3), (64, 4)] {
        moved += queue_round(capacity, threads);
    }
    assert!(moved > 0);
    eprintln!("queue: {moved} values moved through capacities 2, 4 and 64");
}

fn pool(count: u32) -> RecvPool<SimFabric> {
    let cfg = FabricConfig {
        sim: SimOptions { network: Some(SimNetwork::new()), ..Default::default() },
        ..Default::default()
    };
    RecvPool::new(&SimFabric::open(&cfg).unwrap(), count, 64).unwrap()
}

/// Takers and returners on several threads; an ownership table records who
/// holds each buffer, so a buffer handed out twice is caught at once.
#[test]
fn pool_never_hands_out_a_buffer_twice() {
    const COUNT: u32 = 16;
    const FREE: u8 = 0;
    const HELD: u8 = 1;
    let p = Arc::new(pool(COUNT));
    let owner: Arc<Vec<AtomicU8>> = Arc::new((0..COUNT).map(|_| AtomicU8::new(FREE)).collect());
    let cycles = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + BUDGET / 2;
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let (p, owner, cycles) = (p.clone(), owner.clone(), cycles.clone());
            std::thread::spawn(move || {
                let mut mine: Vec<u32> = Vec::new();
                let mut k = t;
                while Instant::now() < deadline {
                    k = k.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    if (k >> 33) % 2 == 0 || mine.is_empty() {
                        match p.take() {
                            Some(id) => {
                                let was = owner[id as usize].swap(HELD, Ordering::AcqRel);
                                assert_eq!(was, FREE, "buffer {id} handed out while held");
                                mine.push(id);
                            }
                            None => std::thread::yield_now(),
                        }
                    } else {
                        let id = mine.swap_remove(((k >> 40) as usize) % mine.len());
                        // Mark free before returning: once returned, another
                        // thread may take it at once.
                        assert_eq!(owner[id as usize].swap(FREE, Ordering::AcqRel), HELD);
                        p.give_back(id).expect("a held buffer returns");
                        cycles.fetch_add(1, Ordering::Relaxed);
                    }
                }
                for id in mine {
                    owner[id as usize].store(FREE, Ordering::Release);
                    p.give_back(id).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(p.available(), COUNT as usize, "every buffer back exactly once");
    assert!(cycles.load(Ordering::Relaxed) > 0);
    eprintln!("pool: {} take/return cycles", cycles.load(Ordering::Relaxed));
}

/// Two threads race to return the same buffer: exactly one succeeds, the
/// other is refused, and the buffer is in the pool once.
#[test]
fn racing_double_returns_succeed_exactly_once() {
    let p = Arc::new(pool(4));
    let deadline = Instant::now() + BUDGET / 4;
    let mut rounds = 0u64;
    while Instant::now() < deadline {
        let id = p.take().unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let wins = Arc::new(AtomicUsize::new(0));
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let (p, barrier, wins) = (p.clone(), barrier.clone(), wins.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    match p.give_back(id) {
                        Ok(()) => {
                            wins.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => assert_eq!(e, ReturnError::NotInUse(id)),
                    }
                })
            })
            .collect();
        for r in racers {
            r.join().unwrap();
        }
        assert_eq!(wins.load(Ordering::Relaxed), 1, "round {rounds}");
        assert_eq!(p.available(), 4);
        rounds += 1;
    }
    assert!(rounds > 0);
}

/// Random pushes, reads and consumes against a `VecDeque` model, at sizes
/// where the indices wrap constantly.
#[test]
fn incoming_ring_matches_its_model() {
    let deadline = Instant::now() + BUDGET / 2;
    let mut x = 0x1234_5678_9ABC_DEF1u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut ops = 0u64;
    let mut id = 0u32;
    for size in [1u32, 2, 8, 64].into_iter().cycle() {
        if Instant::now() >= deadline {
            break;
        }
        let mut ring = IncomingRing::new(size).unwrap();
        let mut model: VecDeque<u32> = VecDeque::new();
        for _ in 0..20_000 {
            ops += 1;
            match next() % 3 {
                0 => {
                    let e = IncomingEntry { buffer_id: id, data_length: id ^ 0x55, ..Default::default() };
                    let pushed = ring.push(e);
                    assert_eq!(pushed, model.len() < size as usize);
                    if pushed {
                        model.push_back(id);
                    }
                    id = id.wrapping_add(1);
                }
                1 => {
                    let i = (next() % (u64::from(size) + 1)) as u32;
                    let got = ring.get(i).map(|e| (e.buffer_id, e.data_length));
                    assert_eq!(got, model.get(i as usize).map(|&b| (b, b ^ 0x55)));
                }
                _ => {
                    let n = (next() % (u64::from(size) + 2)) as u32;
                    let done = ring.consume(n);
                    assert_eq!(done as usize, (n as usize).min(model.len()));
                    model.drain(..done as usize);
                }
            }
            let h = ring.header();
            assert_eq!((h.used as usize, ring.free() as usize), (model.len(), size as usize - model.len()));
            assert_eq!(h.back, (h.front + h.used) % size, "front + used = back (mod size)");
        }
    }
    eprintln!("incoming ring: {ops} operations matched the model");
}
