//! `Engine::recv_begin` / `recv_from_caller` / `recv_end` on `sim`: user
//! threads that wait for data poll node 1's receive side themselves, beside
//! its receive thread, which sleeps at its first idle iteration here (so the
//! waiters take over often). Node 0 sends numbered, checksummed records in
//! bursts with pauses. Checked: every record arrives once, in order, intact;
//! the `received` up-calls never overlap and always carry the token of the
//! thread that makes them; waiters did receive. Then the hand-back: after
//! the last waiter leaves the sleeping thread, a record must reach it
//! through its (re-armed) completion queue, not its 100 ms safety net; the
//! negative control leaves without arming, and the same check catches it.

mod common;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::engine::{sim_config, start_engines};
use common::records::Rng;
use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::driver::{consume_received, SendTargets};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::msgrc::recv_pool::RecvPool;
use ibdxnet::msgrc::{
    CallerPoll, CompletedList, Engine, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults,
};

const WAITERS: usize = 3;
/// magic u32, checksum u32, sequence number u64, filler.
const RECORD: usize = 48;
const MAGIC: u32 = 0xCA11_E4ED;
const RECORDS: u64 = 30_000;
/// Hand-back rounds, and how many of them may be late on a loaded host.
const ROUNDS: usize = 20;
const LATE: Duration = Duration::from_millis(50);
const STALL: Duration = Duration::from_secs(60);

/// One at a time on the 2 cores: the hand-back check measures delays.
static SERIAL: Mutex<()> = Mutex::new(());

thread_local! {
    /// This thread's token: waiter + 1; 0 on the engine's threads.
    static TOKEN: Cell<usize> = const { Cell::new(0) };
}

fn record(seq: u64) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[8..16].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in r[16..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_mul(31).wrapping_add(i as u8);
    }
    let sum = r[8..].iter().fold(0x811C_9DC5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    r[..4].copy_from_slice(&MAGIC.to_le_bytes());
    r[4..8].copy_from_slice(&sum.to_le_bytes());
    r
}

#[derive(Default)]
struct Handler {
    /// Node 0's stream to node 1.
    out: Mutex<SendTargets<()>>,
    /// The token lent to the holder of the receive state (`lend_recv_role`).
    role: AtomicUsize,
    in_upcall: AtomicBool,
    overlapping: AtomicU64,
    wrong_token: AtomicU64,
    /// `received` calls with data made on a waiter's thread.
    waiter_upcalls: AtomicU64,
    /// Node 1: bytes not yet a whole record, and what was wrong.
    rx: Mutex<(Vec<u8>, Vec<String>)>,
    /// Node 1: records received in order.
    delivered: AtomicU64,
    pool: OnceLock<Arc<RecvPool<SimFabric>>>,
}

impl EngineHandler for Handler {
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage {
        let mut out = self.out.lock().unwrap();
        out.account(prev, completed);
        out.next_package(|t| (t.unposted() > 0).then(|| t.package(t.unposted())))
    }

    fn lend_recv_role(&self, token: usize) -> usize {
        self.role.swap(token, Relaxed)
    }

    fn received(&self, ring: &IncomingRing) -> u32 {
        let token = TOKEN.with(Cell::get);
        if self.in_upcall.swap(true, Acquire) {
            self.overlapping.fetch_add(1, Relaxed);
        }
        if self.role.load(Relaxed) != token {
            self.wrong_token.fetch_add(1, Relaxed);
        }
        let Some(pool) = self.pool.get() else { return 0 };
        let mut rx = self.rx.lock().unwrap();
        let (pending, errors) = &mut *rx;
        let (n, refused) = consume_received(ring, pool, NodeId(1), |_, _, data| pending.extend_from_slice(data));
        if n > 0 && token != 0 {
            self.waiter_upcalls.fetch_add(1, Relaxed);
        }
        if refused > 0 {
            errors.push(format!("{refused} receive buffers given back twice"));
        }
        let mut at = 0;
        while errors.is_empty() && pending.len() - at >= RECORD {
            let r = &pending[at..at + RECORD];
            let seq = u64::from_le_bytes(r[8..16].try_into().unwrap());
            let due = self.delivered.load(Relaxed);
            if r != record(seq) || seq != due {
                errors.push(format!("record {seq} (magic {:02x?}) where {due} was due", &r[..4]));
            }
            self.delivered.store(seq + 1, Release);
            at += RECORD;
        }
        pending.drain(..at);
        drop(rx);
        self.in_upcall.store(false, Release);
        n
    }

    fn node_event(&self, _: NodeEvent) {}
}

struct Pair {
    nodes: Vec<(Engine<SimFabric>, Arc<Handler>)>,
    sent: AtomicU64,
}

impl Pair {
    /// `threads`: the engines' `engine_threads`.
    fn start(threads: &str) -> Pair {
        let net = SimNetwork::new();
        let nodes = start_engines(
            2,
            |_| Arc::new(Handler::default()),
            |i| {
                let mut c = sim_config(i, &net);
                c.recv_buffer_size = 1024; // records span receive buffers
                c.set("parking_sleep_after_us", "0").unwrap(); // sleep at the first idle iteration
                c.set("engine_threads", threads).unwrap();
                c
            },
        );
        for (e, h) in &nodes {
            h.pool.set(e.buffer_pool()).ok().unwrap();
        }
        let conn = nodes[0].0.connect(NodeId(1)).expect("connect");
        // SAFETY: the ring is the connection's, which the engine keeps while it
        // runs (the test shuts both down before they drop); only this stream writes into it.
        unsafe { nodes[0].1.out.lock().unwrap().add(NodeId(1), conn.ring().address(), conn.ring().size(), ()) };
        Pair { nodes, sent: AtomicU64::new(0) }
    }

    fn rx(&self) -> &Handler {
        &self.nodes[1].1
    }

    /// Node 0 sends the next `n` records (waiting for ring room).
    fn send(&self, n: u64) {
        let (e0, tx) = &self.nodes[0];
        let t0 = Instant::now();
        for _ in 0..n {
            let rec = record(self.sent.load(Relaxed));
            loop {
                let written = tx.out.lock().unwrap().get_mut(1).unwrap().write(&rec);
                if written {
                    break;
                }
                assert!(t0.elapsed() < STALL, "no room in node 0's ring for {STALL:?}");
                e0.wake_send();
                std::thread::yield_now();
            }
            self.sent.fetch_add(1, Relaxed);
        }
        e0.wake_send();
    }

    /// Waits until node 1 has every record sent; fails on a wrong one.
    fn await_delivered(&self) -> Duration {
        let t0 = Instant::now();
        while self.rx().delivered.load(Acquire) < self.sent.load(Relaxed) {
            let errors = self.rx().rx.lock().unwrap().1.clone();
            assert!(errors.is_empty(), "node 1: {errors:?}");
            assert!(
                t0.elapsed() < STALL,
                "node 1 has {} of {} records after {STALL:?}",
                self.rx().delivered.load(Acquire),
                self.sent.load(Relaxed)
            );
            std::thread::yield_now();
        }
        t0.elapsed()
    }

    /// One waiter's turn on node 1: begin, poll `polls` times (or until
    /// nobody else holds the state), end. Whether it began.
    fn wait_once(&self, token: usize, polls: u64) -> bool {
        let e1 = &self.nodes[1].0;
        if !e1.recv_begin() {
            return false;
        }
        for _ in 0..polls {
            if e1.recv_from_caller(token) == CallerPoll::Stopped {
                break;
            }
            std::thread::yield_now();
        }
        e1.recv_end(token);
        true
    }

    fn shutdown(self) {
        for (e, _) in self.nodes {
            e.shutdown();
        }
    }
}

#[test]
fn waiting_callers_receive_beside_the_thread_and_every_record_arrives_once_in_order() {
    stress("dedicated");
}

#[test]
fn waiting_callers_receive_beside_the_shared_thread_and_every_record_arrives_once_in_order() {
    stress("shared");
}

/// Node 0 sends [`RECORDS`] in bursts and pauses while [`WAITERS`] threads
/// take turns at polling node 1's receive side.
fn stress(threads: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = Pair::start(threads);
    let done = AtomicBool::new(false);
    let began = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..WAITERS {
            let (pair, done, began) = (&pair, &done, &began);
            s.spawn(move || {
                TOKEN.with(|t| t.set(w + 1));
                let mut rng = Rng(0xA11C_E000 + w as u64);
                while !done.load(Acquire) {
                    sleep(Duration::from_micros(rng.below(1500)));
                    if pair.wait_once(w + 1, 1 + rng.below(200)) {
                        began.fetch_add(1, Relaxed);
                    }
                }
            });
        }
        let mut rng = Rng(0x5E4D_0001);
        while pair.sent.load(Relaxed) < RECORDS {
            pair.send((1 + rng.below(60)).min(RECORDS - pair.sent.load(Relaxed)));
            if rng.below(4) == 0 {
                sleep(Duration::from_micros(rng.below(2000)));
            }
        }
        pair.await_delivered();
        done.store(true, Release);
    });
    let rx = pair.rx();
    let e1 = &pair.nodes[1].0;
    let stat = |k: &str| e1.stats_map().into_iter().find(|(n, _)| *n == k).map(|(_, v)| v).unwrap();
    let counts = format!(
        "waits begun {}, up-calls on waiters {}, recv_caller_runs {}, recv_sleeps {}",
        began.load(Relaxed),
        rx.waiter_upcalls.load(Relaxed),
        stat("recv_caller_runs"),
        stat("recv_sleeps")
    );
    println!("{threads}: {RECORDS} records; {counts}");
    assert!(rx.rx.lock().unwrap().1.is_empty(), "{:?}", rx.rx.lock().unwrap().1);
    assert_eq!(rx.delivered.load(Acquire), RECORDS);
    assert_eq!(rx.overlapping.load(Relaxed), 0, "overlapping `received` up-calls; {counts}");
    assert_eq!(rx.wrong_token.load(Relaxed), 0, "up-calls with another thread's token; {counts}");
    assert!(rx.waiter_upcalls.load(Relaxed) > 0, "no waiter ever received: {counts}");
    assert_eq!(stat("errors"), 0);
    pair.shutdown();
}

/// `ROUNDS` times: the receive thread asleep, a waiter begins, polls, and
/// leaves; then a record comes. How many took `LATE` or longer.
fn late_after_leaving(pair: &Pair) -> usize {
    TOKEN.with(|t| t.set(1));
    let mut late = 0;
    for round in 0..ROUNDS {
        sleep(Duration::from_millis(5)); // the thread falls asleep (armed)
        assert!(pair.wait_once(1, 3), "round {round}: the receive thread was awake after 5 ms without traffic");
        sleep(Duration::from_millis(5)); // the record comes well after the leave
        pair.send(1);
        if pair.await_delivered() >= LATE {
            late += 1;
        }
    }
    late
}

#[test]
fn the_last_waiter_hands_the_watch_back_to_the_sleeping_thread() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = Pair::start("dedicated");
    let late = late_after_leaving(&pair);
    println!("hand-back: {late} of {ROUNDS} late");
    assert!(late <= 2, "{late} of {ROUNDS} records after the last waiter left took {LATE:?} or more");
    pair.shutdown();
}

/// The negative control: leaving without arming strands the records until
/// the thread's 100 ms safety net, and the check above sees it.
#[test]
fn negative_control_without_the_hand_back_records_wait_for_the_safety_net() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = Pair::start("dedicated");
    pair.nodes[1].0.test_recv_end_without_arming(true);
    let late = late_after_leaving(&pair);
    println!("negative control: {late} of {ROUNDS} late");
    assert!(late >= 5, "only {late} of {ROUNDS} records were late without the hand-back: the check cannot see it");
    pair.shutdown();
}
