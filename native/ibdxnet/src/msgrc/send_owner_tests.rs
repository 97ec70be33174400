//! The combining lock under stress: callers publish into a queue and run the
//! state (which "posts" what it finds there), an engine thread runs it too.
//! Every item must be posted exactly once, in each producer's order, with
//! one runner at a time; the negative control shows the test sees lost posts.

use super::*;
use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

const PRODUCERS: usize = 4;

/// What a run does: takes everything published so far and "posts" it.
struct Poster {
    posted: Vec<(usize, u32)>,
}

struct World {
    owned: Owned<Poster>,
    ring: Mutex<VecDeque<(usize, u32)>>,
    /// Runs in progress: must never exceed 1.
    inside: AtomicUsize,
    overlaps: AtomicUsize,
    /// Items found in the ring at quiescent points (taken out there).
    stranded: AtomicUsize,
}

fn run_once(w: &World, p: &mut Poster) -> usize {
    if w.inside.fetch_add(1, SeqCst) != 0 {
        w.overlaps.fetch_add(1, SeqCst);
    }
    let taken: Vec<_> = crate::util::lock(&w.ring).drain(..).collect();
    // A run takes a while (an up-call and a post): callers do meet a holder.
    for _ in 0..200 {
        std::hint::spin_loop();
    }
    let n = taken.len();
    p.posted.extend(taken);
    w.inside.fetch_sub(1, SeqCst);
    n
}

/// What a stress run left: items not posted by the next quiescent point (or
/// the end), runs that overlapped, and the posted items in order.
struct Stress {
    left: usize,
    overlaps: usize,
    posted: Vec<(usize, u32)>,
}

/// `PRODUCERS` callers publish `per_producer` items each and run the state;
/// with `engine_thread`, a thread that never marks runs it whenever free.
fn stress(per_producer: u32, ignore_marks: bool, engine_thread: bool) -> Stress {
    let mut owned = Owned::new(Poster { posted: Vec::new() });
    owned.ignore_marks = ignore_marks;
    let w = Arc::new(World {
        owned,
        ring: Mutex::new(VecDeque::new()),
        inside: AtomicUsize::new(0),
        overlaps: AtomicUsize::new(0),
        stranded: AtomicUsize::new(0),
    });
    let done = Arc::new(AtomicBool::new(false));
    let thread = engine_thread.then(|| {
        let (w, done) = (w.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(SeqCst) {
                w.owned.run(Holder::Thread, false, |p| run_once(&w, p));
                std::thread::yield_now();
            }
        })
    });
    let start = Arc::new(std::sync::Barrier::new(PRODUCERS));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            let (w, start) = (w.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for seq in 0..per_producer {
                    crate::util::lock(&w.ring).push_back((id, seq));
                    w.owned.run(Holder::Caller, true, |p| run_once(&w, p));
                    if !engine_thread && seq % 8 == 7 {
                        // Every caller has returned and nobody else runs: a
                        // quiescent point, where the ring must be empty.
                        if start.wait().is_leader() {
                            let mut ring = crate::util::lock(&w.ring);
                            w.stranded.fetch_add(ring.len(), SeqCst);
                            ring.clear();
                        }
                        start.wait();
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().expect("producer");
    }
    done.store(true, SeqCst);
    if let Some(t) = thread {
        t.join().expect("engine thread");
    }
    // Nothing runs any more: what is still in the ring was left behind.
    let left = crate::util::lock(&w.ring).len() + w.stranded.load(SeqCst);
    let posted = w.owned.try_with(|p| std::mem::take(&mut p.posted)).expect("nobody holds it");
    Stress { left, overlaps: w.overlaps.load(SeqCst), posted }
}

#[test]
fn every_published_item_is_posted_once_in_order_by_one_runner_at_a_time() {
    let per: u32 = 50_000;
    for engine_thread in [false, true] {
        let o = stress(per, false, engine_thread);
        assert_eq!(o.left, 0, "published items left unposted (engine thread: {engine_thread})");
        assert_eq!(o.overlaps, 0, "two runs at once");
        assert_eq!(o.posted.len(), PRODUCERS * per as usize, "each item posted once");
        let mut next = [0u32; PRODUCERS];
        for (id, seq) in o.posted {
            assert_eq!(seq, next[id], "producer {id}: out of order or doubled");
            next[id] += 1;
        }
    }
}

#[test]
fn negative_control_without_the_recheck_items_are_left_behind() {
    // The holder ignores marks: a caller that found the lock held leaves its
    // item to a holder whose run began before it. The quiescent points
    // (every 8 items) catch it, in a round or two alone; beside other tests
    // (fewer collisions) it may take more: up to 60 rounds.
    let caught = (0..60).any(|_| stress(2_000, true, false).left > 0);
    assert!(caught, "the stress test did not notice a holder that ignores marks");
}

#[test]
fn stop_waits_for_the_holder_and_ends_every_later_run() {
    let owned = Arc::new(Owned::new(Poster { posted: Vec::new() }));
    let (o, entered) = (owned.clone(), Arc::new(AtomicBool::new(false)));
    let e = entered.clone();
    let holder = std::thread::spawn(move || {
        o.run(Holder::Caller, true, |_| {
            e.store(true, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(50));
            1
        })
    });
    while !entered.load(SeqCst) {
        std::thread::yield_now();
    }
    assert_eq!(owned.run(Holder::Caller, true, |_| 1), Outcome::Held(Holder::Caller));
    owned.stop();
    assert_eq!(holder.join().expect("holder"), Outcome::Ran { runs: 2, work: 2 }, "the mark made it run once more");
    assert_eq!(owned.run(Holder::Caller, true, |_| 1), Outcome::Stopped);
    assert_eq!(owned.try_with(|_| ()), None);
}
