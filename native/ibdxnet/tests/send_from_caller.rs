//! `Engine::send_from_caller` end to end on `sim`: the data is written by
//! user threads, as the Java side does. Four producers write records into
//! node 0's send ring to node 1 under a small lock (waiting while the ring is
//! full), then call `send_from_caller`; the handler's `next_data_to_send`,
//! run by whichever thread holds the send state (a producer or the engine's
//! thread), applies the engine's reports and offers `[posted, written)`.
//! Node 1 checks that every record arrives once, in its producer's order,
//! intact. Three phases: producers taking turns with 2–3 ms pauses (the send
//! thread asleep: a caller runs the send work, and its burst must arrive
//! without waiting for the 100 ms safety net), two producers a round after
//! a pause (the second meets the first's caller run: its mark must get its
//! data sent), and continuous streaming through a small ring (waits for room).

mod common;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::engine::{sim_config, start_engines};
use common::records::Rng;
use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::driver::{consume_received, SendTargets};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::msgrc::recv_pool::RecvPool;
use ibdxnet::msgrc::{CompletedList, Engine, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults};

const PRODUCERS: usize = 4;
/// magic u32, producer u32, sequence number u64, payload length u32, checksum u32.
const HEADER: usize = 24;
const MAGIC: u32 = 0x5CA1_1E25;
const MAX_PAYLOAD: usize = 20_000;
/// Phase 1: bursts, one producer at a time; phase 2: two at a time.
const TURNS: usize = 120;
const PAIRS: usize = 80;
/// Phase 3: records per producer.
const STREAM: u64 = 2500;
/// Longest wait for anything (a stuck engine fails the test, it does not hang it).
const STALL: Duration = Duration::from_secs(30);

/// Tests here measure pauses and latencies: one at a time on the 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());

thread_local! {
    /// This thread's token for `send_from_caller`: producer + 1; 0 on the engine's threads.
    static TOKEN: Cell<usize> = const { Cell::new(0) };
}

/// FNV-1a over the header's producer, sequence number and length, and the payload.
fn checksum(producer: u32, seq: u64, payload: &[u8]) -> u32 {
    let head = [&producer.to_le_bytes()[..], &seq.to_le_bytes(), &(payload.len() as u32).to_le_bytes()];
    head.into_iter().flatten().chain(payload).fold(0x811C_9DC5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Record `seq` of `producer`, its payload size drawn from `sizes`.
fn record(producer: u32, seq: u64, sizes: &mut Rng) -> Vec<u8> {
    let len = match sizes.below(100) {
        0..=69 => sizes.below(200),
        70..=94 => 200 + sizes.below(3000),
        _ => 3200 + sizes.below((MAX_PAYLOAD - 3200) as u64),
    } as usize;
    let mut fill = Rng((u64::from(producer) << 40 ^ seq).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let payload: Vec<u8> = (0..len).map(|_| fill.next() as u8).collect();
    let sum = checksum(producer, seq, &payload);
    let header = [MAGIC.to_le_bytes(), producer.to_le_bytes()].concat();
    [&header[..], &seq.to_le_bytes(), &(len as u32).to_le_bytes(), &sum.to_le_bytes(), &payload].concat()
}

/// What node 1 has taken apart: the byte stream from node 0 (records span
/// receive buffers), the next sequence number per producer, what was wrong.
#[derive(Default)]
struct Rx {
    pending: Vec<u8>,
    next: [u64; PRODUCERS],
    /// What was wrong (after the first error, nothing more is parsed).
    errors: Vec<String>,
}

impl Rx {
    fn take(&mut self, data: &[u8], delivered: &[AtomicU64; PRODUCERS]) {
        if !self.errors.is_empty() {
            return;
        }
        self.pending.extend_from_slice(data);
        let mut at = 0;
        while self.pending.len() - at >= HEADER {
            let h = &self.pending[at..at + HEADER];
            let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
            let (magic, producer, len, sum) = (word(0), word(4), word(16) as usize, word(20));
            let seq = u64::from_le_bytes(h[8..16].try_into().unwrap());
            if magic != MAGIC || producer as usize >= PRODUCERS || len > MAX_PAYLOAD {
                return self.errors.push(format!("framing lost at a record header {h:02x?}"));
            }
            let end = at + HEADER + len;
            if self.pending.len() < end {
                break;
            }
            let p = producer as usize;
            if checksum(producer, seq, &self.pending[at + HEADER..end]) != sum {
                self.errors.push(format!("producer {p} record {seq}: bad checksum"));
            }
            if seq != self.next[p] {
                self.errors.push(format!("producer {p}: record {seq} where {} was due", self.next[p]));
            }
            self.next[p] = self.next[p].max(seq + 1);
            delivered[p].store(self.next[p], Release);
            at = end;
        }
        self.pending.drain(..at);
    }
}

/// Both nodes' handler: node 0 only sends, node 1 only receives.
#[derive(Default)]
struct Handler {
    /// Node 0's stream to node 1: positions written, posted, confirmed.
    out: Mutex<SendTargets<()>>,
    /// Notified when confirmations free room in the ring.
    room: Condvar,
    /// The token lent to the holder of the send state (`lend_send_role`).
    role: AtomicUsize,
    in_upcall: AtomicBool,
    /// Up-calls that overlapped another, or ran with another thread's token.
    overlapping: AtomicU64,
    wrong_token: AtomicU64,
    /// `next_data_to_send` calls made on a producer's thread.
    caller_upcalls: AtomicU64,
    /// Callers' up-calls that find nothing take 300 µs (phase 2).
    slow: AtomicBool,
    /// The longest package it offers.
    max_package: AtomicU64,
    rx: Mutex<Rx>,
    /// Node 1: records received in order, per producer.
    delivered: [AtomicU64; PRODUCERS],
    pool: OnceLock<Arc<RecvPool<SimFabric>>>,
}

impl EngineHandler for Handler {
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage {
        let token = TOKEN.with(Cell::get);
        if self.in_upcall.swap(true, Acquire) {
            self.overlapping.fetch_add(1, Relaxed);
        }
        if self.role.load(Relaxed) != token {
            self.wrong_token.fetch_add(1, Relaxed);
        }
        if token != 0 {
            self.caller_upcalls.fetch_add(1, Relaxed);
        }
        let mut out = self.out.lock().unwrap();
        if out.account(prev, completed) > 0 {
            self.room.notify_all();
        }
        let max = self.max_package.load(Relaxed);
        let next = out.next_package(|t| (t.unposted() > 0).then(|| t.package(t.unposted().min(max))));
        drop(out);
        if token != 0 && next.flags == 0 && self.slow.load(Relaxed) {
            // Phase 2: a slow look that finds nothing, unlocked: others publish meanwhile.
            let end = Instant::now() + Duration::from_micros(300);
            spin(|| Instant::now() >= end);
        }
        self.in_upcall.store(false, Release);
        next
    }

    fn lend_send_role(&self, token: usize) -> usize {
        self.role.swap(token, Relaxed)
    }

    fn received(&self, ring: &IncomingRing) -> u32 {
        let Some(pool) = self.pool.get() else { return 0 };
        let mut rx = self.rx.lock().unwrap();
        let (n, refused) = consume_received(ring, pool, NodeId(1), |_, _, data| rx.take(data, &self.delivered));
        if refused > 0 {
            rx.errors.push(format!("{refused} receive buffers given back twice"));
        }
        n
    }

    fn node_event(&self, _: NodeEvent) {}
}

impl Handler {
    /// Writes `rec` into the ring (waiting for room), then lets the engine send it.
    fn publish(&self, engine: &Engine<SimFabric>, rec: &[u8]) {
        let t0 = Instant::now();
        let mut out = self.out.lock().unwrap();
        while !out.get_mut(1).expect("the stream to node 1").write(rec) {
            assert!(t0.elapsed() < STALL, "no room in the send ring for {STALL:?}");
            out = self.room.wait_timeout(out, Duration::from_millis(5)).unwrap().0;
        }
        drop(out); // before the call: it may run `next_data_to_send` on this thread
        engine.send_from_caller(TOKEN.with(Cell::get), rec.len() as u32);
    }

    /// Node 1: waits until `cond`; fails at once if something arrived wrong.
    fn wait_for(&self, what: &str, mut cond: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while !cond() {
            let errors = self.rx.lock().unwrap().errors.clone();
            assert!(errors.is_empty(), "node 1, waiting for {what}: {errors:?}");
            assert!(t0.elapsed() < STALL, "timed out after {STALL:?} waiting for {what}");
            sleep(Duration::from_micros(100));
        }
    }

    fn positions(&self) -> (u64, u64, u64) {
        let mut out = self.out.lock().unwrap();
        let t = out.get_mut(1).unwrap();
        (t.written, t.posted, t.confirmed)
    }
}

/// Waits, yielding, for `done`: for waits shorter than a sleep.
fn spin(done: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < STALL, "timed out after {STALL:?}");
        std::thread::yield_now();
    }
}

fn stat(e: &Engine<SimFabric>, key: &str) -> u64 {
    e.stats_map().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v).unwrap()
}

/// What one producer saw.
#[derive(Default)]
struct Seen {
    /// Phases 1 and 2: from a burst's first write until node 1 had all of it.
    latencies: [Vec<Duration>; 2],
    /// Phase 1 bursts whose first call ran the send work on this thread.
    ran_own: u64,
    records: u64,
}

/// What the producers share: node 0 (`e`, `tx`) sends to node 1 (`rx`);
/// `turn` orders phase 1 (and starts phase 2's seconds), `arrived` gates phase 2.
struct Run<'a> {
    e: &'a Engine<SimFabric>,
    tx: &'a Handler,
    rx: &'a Handler,
    turn: AtomicUsize,
    arrived: AtomicUsize,
}

/// Producer `p`'s three phases.
fn produce(p: usize, run: &Run) -> Seen {
    let Run { e, tx, rx, turn, arrived } = run;
    TOKEN.with(|t| t.set(p + 1));
    let mut rng = Rng(0x5EED_0000 + p as u64 * 0x1_0001);
    let mut sizes = Rng(0xC0FF_EE00 + p as u64 * 7919);
    let mut seen = Seen::default();
    let mut send = |seen: &mut Seen| {
        let rec = record(p as u32, seen.records, &mut sizes);
        tx.publish(e, &rec);
        seen.records += 1;
    };
    // Phase 1: one burst per turn, after a pause in which the send thread falls asleep.
    for r in (p..TURNS).step_by(PRODUCERS) {
        rx.wait_for("my turn", || turn.load(Acquire) == r);
        sleep(Duration::from_micros(2000 + rng.below(1000)));
        // (The only producer now: the callers' up-calls are this one's.)
        let (t0, upcalls) = (Instant::now(), tx.caller_upcalls.load(Relaxed));
        send(&mut seen);
        seen.ran_own += u64::from(tx.caller_upcalls.load(Relaxed) > upcalls);
        for _ in 0..rng.below(3) {
            send(&mut seen);
        }
        rx.wait_for("the burst at node 1", || rx.delivered[p].load(Acquire) >= seen.records);
        seen.latencies[0].push(t0.elapsed());
        turn.store(r + 1, Release);
    }
    // Phase 2: two producers a round, after a pause; the second comes while
    // the first's caller run likely still holds the send state (its last,
    // empty up-call is slow): only its mark gets its data sent.
    tx.slow.store(true, Relaxed);
    for r in 0..PAIRS {
        arrived.fetch_add(1, AcqRel);
        rx.wait_for("the others", || arrived.load(Acquire) >= (r + 1) * PRODUCERS);
        let second = (r + 1) % PRODUCERS == p;
        if r % PRODUCERS != p && !second {
            continue;
        }
        sleep(Duration::from_micros(2000));
        if second {
            // 20–350 µs after the first began to publish (`turn` says when).
            spin(|| turn.load(Acquire) > TURNS + r);
            let end = Instant::now() + Duration::from_micros(20 + rng.below(330));
            spin(|| Instant::now() >= end);
        } else {
            turn.store(TURNS + r + 1, Release);
        }
        let t0 = Instant::now();
        send(&mut seen);
        rx.wait_for("the record at node 1", || rx.delivered[p].load(Acquire) >= seen.records);
        seen.latencies[1].push(t0.elapsed());
    }
    // Phase 3: streaming.
    tx.slow.store(false, Relaxed);
    for _ in 0..STREAM {
        send(&mut seen);
    }
    seen
}

/// Runs the three phases with packages of at most `max_package` bytes, both
/// nodes configured by `tweak`; checks that every record arrived once, in
/// order, intact, and was confirmed, and that the callers ran the send work
/// if `callers` (above all after the pauses of phase 1, in which the engine's
/// thread fell asleep), else never.
fn run(mode: &str, callers: bool, max_package: u64, tweak: impl Fn(&mut ibdxnet::msgrc::EngineConfig)) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let net = SimNetwork::new();
    let nodes: Vec<(Engine<SimFabric>, Arc<Handler>)> = start_engines(
        2,
        |_| Arc::new(Handler { max_package: AtomicU64::new(max_package), ..Default::default() }),
        |i| {
            let mut c = sim_config(i, &net);
            // A small ring (room runs out while streaming), small receive
            // buffers (records span them and the work requests).
            c.send_ring_size = 64 << 10;
            c.recv_buffer_size = 4096;
            // Records up to 20 KB: callers post them all (the default leaves
            // those over 4 KiB to the thread).
            c.send_from_caller_max_bytes = 1 << 20;
            tweak(&mut c);
            c
        },
    );
    for (e, h) in &nodes {
        h.pool.set(e.buffer_pool()).ok().unwrap();
    }
    let ((e0, tx), (e1, rx)) = (&nodes[0], &nodes[1]);
    let conn = e0.connect(NodeId(1)).expect("connect");
    // SAFETY: the ring is `conn`'s, which we hold until both engines are shut
    // down; only this stream writes into it (under `out`'s lock).
    unsafe { tx.out.lock().unwrap().add(NodeId(1), conn.ring().address(), conn.ring().size(), ()) };
    let shared = &Run { e: e0, tx, rx, turn: AtomicUsize::new(0), arrived: AtomicUsize::new(0) };
    let t0 = Instant::now();
    let seen: Vec<Seen> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..PRODUCERS).map(|p| s.spawn(move || produce(p, shared))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (p, s) in seen.iter().enumerate() {
        rx.wait_for("every record at node 1", || rx.delivered[p].load(Acquire) >= s.records);
    }
    rx.wait_for("every byte confirmed", || {
        let (w, p, c) = tx.positions();
        w == p && p == c
    });
    let took = t0.elapsed();
    let rxs = rx.rx.lock().unwrap();
    assert!(rxs.errors.is_empty(), "{mode}: {:?}", rxs.errors);
    assert!(rxs.pending.is_empty(), "{mode}: {} bytes of a partial record left", rxs.pending.len());
    let records: Vec<u64> = seen.iter().map(|s| s.records).collect();
    assert_eq!(rxs.next.to_vec(), records, "{mode}: records received per producer");
    for h in [tx, rx] {
        assert_eq!(h.overlapping.load(Relaxed), 0, "{mode}: overlapping `next_data_to_send` calls");
        assert_eq!(h.wrong_token.load(Relaxed), 0, "{mode}: up-calls with another thread's token");
    }
    for e in [e0, e1] {
        assert_eq!(stat(e, "errors"), 0, "{mode}: engine errors");
        assert_eq!(stat(e, "thread_panics"), 0, "{mode}: engine thread panics");
    }
    let (runs, left, sleeps) = (stat(e0, "send_caller_runs"), stat(e0, "send_caller_left"), stat(e0, "send_sleeps"));
    let (upcalls, ran_own) = (tx.caller_upcalls.load(Relaxed), seen.iter().map(|s| s.ran_own).sum::<u64>());
    let counts = format!(
        "send_caller_runs {runs}, send_caller_left {left}, send_sleeps {sleeps}; up-calls on producers {upcalls}, \
         phase 1 bursts they sent themselves {ran_own} of {TURNS}"
    );
    let (n, bytes) = (records.iter().sum::<u64>(), tx.positions().0);
    println!("{mode}: {n} records, {bytes} bytes in {took:?}; {counts}");
    assert!(sleeps > 0, "{mode}: the engine's thread never slept in the pauses: {counts}");
    if callers {
        assert!(runs > 0 && upcalls > 0, "{mode}: the callers never ran the send work: {counts}");
        assert!(ran_own >= TURNS as u64 / 2, "{mode}: bursts after a pause left to the thread: {counts}");
    } else {
        assert_eq!((runs, left, upcalls, ran_own), (0, 0, 0, 0), "{mode}: {counts}");
    }
    for (i, phase) in ["phase 1", "phase 2"].iter().enumerate() {
        let mut lat: Vec<Duration> = seen.iter().flat_map(|s| s.latencies[i].iter().copied()).collect();
        lat.sort();
        let (median, max, n) = (lat[lat.len() / 2], lat[lat.len() - 1], lat.len());
        let late = lat.iter().filter(|&&l| l >= Duration::from_millis(50)).count();
        println!("{mode}: {phase} bursts at node 1 after: median {median:?}, max {max:?}, {late} of {n} ≥ 50 ms");
        // A burst posted by nobody waits for the thread's 100 ms safety net
        // (a few are late on a loaded host anyway).
        assert!(median < Duration::from_millis(20) && late * 10 <= n, "{mode}: {phase} bursts late");
    }
    drop(rxs);
    for (e, _) in nodes {
        e.shutdown();
    }
    drop(conn);
}

#[test]
fn dedicated_threads_callers_send_and_every_record_arrives_once_in_order() {
    run("dedicated", true, u64::MAX, |_| {});
}

#[test]
fn shared_thread_callers_send_and_every_record_arrives_once_in_order() {
    run("shared", true, u64::MAX, |c| c.set("engine_threads", "shared").unwrap());
}

#[test]
fn without_send_from_caller_the_thread_sends_everything() {
    run("send_from_caller=false", false, u64::MAX, |c| c.set("send_from_caller", "false").unwrap());
}

/// Small packages (a handler that offers part of its data per call, as one
/// that serves several nodes in turn does): a caller's run ends at its
/// iteration limit with data left, which the engine's thread must then send,
/// not its 100 ms safety net.
#[test]
fn small_packages_a_callers_run_leaves_nothing_behind() {
    run("512-byte packages", true, 512, |_| {});
}

/// Records above `send_from_caller_max_bytes` are the send thread's: with
/// the limit at 0 no caller runs the send work, and everything arrives.
#[test]
fn records_over_the_limit_are_left_to_the_send_thread() {
    run("send_from_caller_max_bytes=0", false, u64::MAX, |c| c.send_from_caller_max_bytes = 0);
}
