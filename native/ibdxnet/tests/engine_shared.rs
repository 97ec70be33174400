//! `engine_threads=shared` on `sim`: one engine thread per node does the
//! send and the receive work (`msgrc::agent::Both`) and sleeps only when
//! both are idle. The streaming, close, removal and idle tests of
//! `engine_sim.rs` (which runs them with the default, `dedicated`) in this
//! mode; every stream checks integrity and order, so a lost wake-up shows
//! as a stream that stalls (only the 100 ms safety-net timeout moves it on).

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use common::engine::{self, all_to_all, base_config, stream_bytes, wait_until};
use common::scenarios;

use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::OnceLock;
use std::time::Instant;

use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, SimOptions};
use ibdxnet::loopback::StreamOptions;
use ibdxnet::msgrc::config::EngineThreads;
use ibdxnet::msgrc::recv_pool::RecvPool;
use ibdxnet::msgrc::{CompletedList, Engine, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults};

type Node = engine::Node<SimFabric>;

fn stat(n: &Node, key: &str) -> u64 {
    n.engine.stats_map().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v).unwrap()
}

/// The names of this process's threads (the kernel keeps 15 bytes of each).
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect()
}

#[test]
fn two_nodes_stream_both_ways_intact_and_in_order_on_one_thread_each() {
    let _nodes = scenarios::two_nodes_stream_both_ways(EngineThreads::Shared);
    // One shared thread per node, no send or receive thread (this binary
    // starts only shared engines).
    let names = thread_names();
    assert!(names.iter().any(|n| n.starts_with("ibdxnet-shared")), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("ibdxnet-send") || n.starts_with("ibdxnet-recv")), "{names:?}");
}

#[test]
fn four_nodes_all_to_all_intact_and_in_order() {
    scenarios::four_nodes_all_to_all(EngineThreads::Shared, stream_bytes() / 4);
}

/// Few receive buffers and a tiny incoming ring: the thread must keep
/// calling while the user leaves entries (`may_sleep`), and buffers given
/// back must wake it.
#[test]
fn stalled_consumer_without_loss() {
    scenarios::stalled_consumer_without_loss(EngineThreads::Shared);
}

/// A full send queue: send completions must wake the thread.
#[test]
fn tiny_send_queue_loses_nothing() {
    scenarios::tiny_send_queue_loses_nothing(EngineThreads::Shared);
}

#[test]
fn orderly_close_finishes_on_both_sides() {
    scenarios::orderly_close_finishes_on_both_sides(EngineThreads::Shared);
}

#[test]
fn node_removal_closes_and_invalidates() {
    scenarios::node_removal_closes_and_invalidates(EngineThreads::Shared);
}

/// After a stream, an idle shared engine sleeps: about one wake-up per
/// 100 ms timeout, not a loop; both iteration counters count the one
/// thread's iterations, both sleep counters its sleeps, and the operation
/// timers of both roles count.
#[test]
fn idle_shared_thread_sleeps_and_counts_both_roles() {
    let opts = StreamOptions { verify: true, limit: Some(1 << 20), ..Default::default() };
    let (_net, nodes) = scenarios::start(2, EngineThreads::Shared, opts, |c| {
        c.parking.yield_after = Duration::ZERO;
        c.parking.sleep_after = Some(Duration::from_micros(200));
        c.stats_timers = true;
    });
    let _held = all_to_all(&nodes, 1 << 20);
    // The timers of both roles count on the one thread.
    for t in ["send_upcall", "send_post", "recv_poll", "recv_upcall"] {
        assert!(stat(&nodes[0], &format!("timer_{t}_count")) > 0, "timer {t} counted nothing");
    }
    std::thread::sleep(Duration::from_millis(100));
    let keys = ["send_iterations", "recv_iterations", "send_sleeps", "recv_sleeps"];
    let before: Vec<u64> = keys.iter().map(|k| stat(&nodes[0], k)).collect();
    std::thread::sleep(Duration::from_secs(1));
    let after: Vec<u64> = keys.iter().map(|k| stat(&nodes[0], k)).collect();
    let d: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    println!("shared, in 1 s idle: iterations send {} recv {}, sleeps send {} recv {}", d[0], d[1], d[2], d[3]);
    assert!(before[0] > 0, "the shared thread's iterations are counted");
    // One thread counts both roles: the same counts, once no store of its
    // falls between the reads of a snapshot (it wakes every 100 ms).
    let same = (0..20).any(|_| {
        let m: std::collections::HashMap<_, _> = nodes[0].engine.stats_map().into_iter().collect();
        let ok = m["send_iterations"] == m["recv_iterations"] && m["send_sleeps"] == m["recv_sleeps"];
        if !ok {
            std::thread::sleep(Duration::from_millis(7));
        }
        ok
    });
    assert!(same, "one thread: send and receive iterations and sleeps differ: {after:?}");
    assert!(d[0] <= 100, "the idle shared thread looped {d:?}");
    assert!(d[2] >= 5, "the idle shared thread did not sleep: {d:?}");
    assert_eq!(nodes[0].engine.stats().errors.load(Relaxed), 0);
}

/// Sends one flow-control-only package (no ring data) to node 1 whenever
/// asked; counts what it receives and gives the buffers back.
#[derive(Default)]
struct Ping {
    to_send: AtomicU32,
    received: AtomicU64,
    pool: OnceLock<Arc<RecvPool<SimFabric>>>,
    /// Bytes of each package from the start of the send ring (0: flow control only).
    length: AtomicU32,
    /// Keep the received buffers (in `held`) instead of giving them back.
    hold: std::sync::atomic::AtomicBool,
    held: std::sync::Mutex<Vec<u32>>,
}

impl EngineHandler for Ping {
    fn next_data_to_send(&self, _: &PrevWorkResults, _: &CompletedList) -> NextWorkPackage {
        if self.to_send.load(Relaxed) == 0 {
            return NextWorkPackage::default();
        }
        self.to_send.fetch_sub(1, Relaxed);
        let length = self.length.load(Relaxed);
        NextWorkPackage { node_id: 1, fc_data: 1, flags: ibdxnet::abi::NWP_VALID, length, ..Default::default() }
    }
    fn received(&self, ring: &IncomingRing) -> u32 {
        let n = ring.used();
        for i in 0..n {
            let e = ring.get(i).unwrap();
            if e.buffer_id != ibdxnet::abi::NO_BUFFER {
                if self.hold.load(Relaxed) {
                    self.held.lock().unwrap().push(e.buffer_id);
                } else {
                    self.pool.get().unwrap().give_back(e.buffer_id).unwrap();
                }
            }
        }
        self.received.fetch_add(u64::from(n), Relaxed);
        n
    }
    fn node_event(&self, _: NodeEvent) {}
}

/// Both sides asleep, node 0's user asks for one package and rings
/// (`wake_send`): node 0's thread must wake on its doorbell, node 1's on its
/// receive completion queue, not on the 100 ms safety-net timeout. The
/// median of 15 hand-overs stays far below it, in both modes.
#[test]
fn a_sleeping_thread_wakes_for_new_data_and_for_a_receive_completion() {
    for mode in [EngineThreads::Dedicated, EngineThreads::Shared] {
        let net = SimNetwork::new();
        let engines: Vec<(Engine<SimFabric>, Arc<Ping>)> = common::engine::start_engines(
            2,
            |_| Arc::new(Ping::default()),
            |i| {
                let mut c = base_config(i, FabricKind::Sim);
                c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
                c.engine_threads = mode;
                c.parking.sleep_after = Some(Duration::from_micros(200));
                c
            },
        );
        for (e, h) in &engines {
            h.pool.set(e.buffer_pool()).ok().unwrap();
        }
        let _c = engines[0].0.connect(NodeId(1)).unwrap();
        let (e0, h0) = &engines[0];
        let h1 = &engines[1].1;
        let mut took = Vec::new();
        for _ in 0..15 {
            std::thread::sleep(Duration::from_millis(30)); // both threads asleep
            let before = h1.received.load(Relaxed);
            let t0 = Instant::now();
            h0.to_send.fetch_add(1, Relaxed);
            e0.wake_send();
            wait_until("the package", || h1.received.load(Relaxed) > before);
            took.push(t0.elapsed());
        }
        took.sort();
        println!("{mode:?}: hand-over after sleep: median {:?}, max {:?}", took[7], took[14]);
        assert!(took[7] < Duration::from_millis(25), "{mode:?}: woken by the timeout, not the event: {took:?}");
        assert!(stat_engine(e0, "send_sleeps") > 0 && stat_engine(&engines[1].0, "recv_sleeps") > 0);
    }
}

fn stat_engine(e: &Engine<SimFabric>, key: &str) -> u64 {
    e.stats_map().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v).unwrap()
}

/// The receiving node holds every buffer until its pool is empty and its
/// thread sleeps; a buffer given back from another thread must wake it (the
/// pool rings the receive side's doorbell, in `shared` the one doorbell) to
/// post it again, not the 100 ms safety-net timeout. Median of 9.
#[test]
fn a_sleeping_thread_wakes_for_a_returned_buffer() {
    for mode in [EngineThreads::Dedicated, EngineThreads::Shared] {
        let net = SimNetwork::new();
        let engines: Vec<(Engine<SimFabric>, Arc<Ping>)> = common::engine::start_engines(
            2,
            |_| Arc::new(Ping::default()),
            |i| {
                let mut c = base_config(i, FabricKind::Sim);
                c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
                c.engine_threads = mode;
                c.parking.sleep_after = Some(Duration::from_micros(200));
                c.srq_size = 4;
                c.recv_sges_per_wr = 1;
                c.recv_buffer_size = 1024;
                c.recv_buffer_count = 8;
                c.recv_slab_buffers = 8;
                c
            },
        );
        for (e, h) in &engines {
            h.pool.set(e.buffer_pool()).ok().unwrap();
            h.length.store(64, Relaxed);
        }
        let _c = engines[0].0.connect(NodeId(1)).unwrap();
        let (e0, h0) = &engines[0];
        let (e1, h1) = (&engines[1].0, &engines[1].1);
        h1.hold.store(true, Relaxed);
        let pool = e1.buffer_pool();
        let mut took = Vec::new();
        for _ in 0..9 {
            // Take every buffer: each package fills one, which node 1 keeps
            // (its own count, not the pool's, which its thread publishes late).
            while h1.held.lock().unwrap().len() < pool.registered_buffers() as usize {
                let before = h1.received.load(Relaxed);
                h0.to_send.fetch_add(1, Relaxed);
                e0.wake_send();
                wait_until("a package", || h1.received.load(Relaxed) > before);
            }
            wait_until("the pool empty", || pool.available() == 0 && pool.posted() == 0);
            std::thread::sleep(Duration::from_millis(30)); // node 1's thread asleep
            let id = h1.held.lock().unwrap().pop().unwrap();
            let t0 = Instant::now();
            pool.give_back(id).unwrap();
            wait_until("the buffer posted again", || pool.posted() > 0);
            took.push(t0.elapsed());
        }
        took.sort();
        println!("{mode:?}: buffer returned to posted again after sleep: median {:?}, max {:?}", took[4], took[8]);
        assert!(took[4] < Duration::from_millis(25), "{mode:?}: woken by the timeout, not the return: {took:?}");
    }
}
