//! Mesh set-up on sim (issue 22): `N` engines in one process, each with a
//! thread that connects to every other node one after the other (as the
//! Java mesh of `Workload --pattern all` does), reach the full mesh within
//! a bound. Prints where the time went: start-up, per-connect latency,
//! UDP packets and job-thread wake-ups per connection.
//!
//! `IBDXNET_MESH_NODES` sets the node count (default 32);
//! `IBDXNET_MESH_ROUNDS` repeats the measurement (default 1; a bench, the
//! bound is checked on each); `IBDXNET_MESH_DEFAULTS=1` gives the engines
//! the default buffer sizes instead of small ones.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::engine::base_config;
use ibdxnet::con::NodeId;
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, SimOptions};
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::{Engine, EngineConfig};

fn env_u64(key: &str, default: u64) -> u64 {
    std::env::var(key).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

fn stat(e: &Engine<SimFabric>, key: &str) -> u64 {
    e.stats_map().into_iter().find(|(k, _)| *k == key).map_or(0, |(_, v)| v)
}

/// One mesh: start `n` engines, connect all pairs; returns the time to the
/// full mesh (after start-up) and prints the breakdown.
fn mesh(n: u16, defaults: bool) -> Duration {
    let t_start = Instant::now();
    let engines = small_engines(n, |c| {
        if defaults {
            // The engine's defaults (what Java passes unless told otherwise).
            let d = EngineConfig::new(c.node_id, c.listen);
            c.send_ring_size = d.send_ring_size;
            c.srq_size = d.srq_size;
            c.recv_buffer_count = d.recv_buffer_count;
            c.incoming_ring_size = d.incoming_ring_size;
        }
    });
    let started = t_start.elapsed();
    let engines = Arc::new(engines);
    let t0 = Instant::now();
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let engines = engines.clone();
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                for j in 0..n {
                    if j != i {
                        let t = Instant::now();
                        engines[usize::from(i)].connect(NodeId(j)).expect("connect");
                        lat.push(t.elapsed());
                    }
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<Duration> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let meshed = t0.elapsed();
    // Every node sees every other established (the last answers may still be on the way).
    let full = |e: &Engine<SimFabric>| (0..n).filter(|&j| e.manager().established(NodeId(j)).is_some()).count();
    let t_wait = Instant::now();
    while engines.iter().any(|e| full(e) < usize::from(n) - 1) {
        assert!(t_wait.elapsed() < Duration::from_secs(30), "mesh not complete on both sides");
        std::thread::sleep(Duration::from_millis(1));
    }
    let both = t0.elapsed();
    lat.sort();
    let slow = lat.iter().filter(|l| **l >= Duration::from_millis(45)).count();
    let conns = u64::from(n) * u64::from(n - 1) / 2;
    let sum = |k: &str| engines.iter().map(|e| stat(e, k)).sum::<u64>();
    let pct = |p: usize| lat[(lat.len() - 1) * p / 100];
    eprintln!(
        "mesh n={n}: start-up {started:.1?}, mesh (connect calls) {meshed:.1?}, both sides {both:.1?}; \
         connect latency p50 {:.1?} p90 {:.1?} p99 {:.1?} max {:.1?}, {slow} of {} ≥ 45 ms; per connection: {:.2} packets out, \
         {:.2} in, {:.2} job wake-ups, {:.2} queue pairs created; dropped stale {} foreign {} malformed {}",
        pct(50),
        pct(90),
        pct(99),
        lat[lat.len() - 1],
        lat.len(),
        sum("packets_out") as f64 / conns as f64,
        sum("packets_in") as f64 / conns as f64,
        sum("job_wakeups") as f64 / conns as f64,
        sum("connections_created") as f64 / conns as f64,
        sum("dropped_stale"),
        sum("dropped_foreign"),
        sum("dropped_malformed"),
    );
    drop(engines);
    both
}

/// The bound, after start-up. Measured on 2 shared cores before and after
/// the change count in `connect`: 32 nodes in 24–32 ms, 64 in 94–121 ms
/// (the Java mesh time is mostly the nodes' start, see bench/HISTORY.md). A
/// connect that learnt of its connection only at its 50 ms poll would take
/// 31 × 50 ms per thread: more than the bound.
const BOUND: Duration = Duration::from_secs(1);

/// `n` small engines on one sim network with room for `max` connections
/// each (settings changed by `tweak`), every one knowing every other.
fn churn_engines(n: u16, max: u32, tweak: impl Fn(&mut EngineConfig)) -> Vec<Engine<SimFabric>> {
    small_engines(n, |c| {
        c.max_connections = max;
        tweak(c);
    })
}

/// `n` engines on one sim network with small memory each (the mesh tests
/// are about the connection manager; settings changed by `tweak`), every
/// one knowing every other.
fn small_engines(n: u16, tweak: impl Fn(&mut EngineConfig)) -> Vec<Engine<SimFabric>> {
    let net = SimNetwork::new();
    let engines: Vec<Engine<SimFabric>> = (0..n)
        .map(|i| {
            let mut c = base_config(i, FabricKind::Sim);
            c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
            c.send_ring_size = 64 << 10;
            c.srq_size = 64;
            c.recv_buffer_count = 512;
            c.incoming_ring_size = 128;
            tweak(&mut c);
            Engine::start(c, StreamHandler::<SimFabric>::new(NodeId(i), StreamOptions::default())).expect("start")
        })
        .collect();
    let addrs: Vec<_> = engines.iter().map(|e| e.manager().local_addr()).collect();
    for (i, e) in engines.iter().enumerate() {
        for (j, a) in addrs.iter().enumerate() {
            if i != j {
                e.add_node(NodeId(j as u16), *a).unwrap();
            }
        }
    }
    engines
}

#[test]
fn nodes_in_one_process_reach_the_full_mesh_quickly() {
    let _ = env_logger::Builder::from_default_env().is_test(true).try_init();
    let n = env_u64("IBDXNET_MESH_NODES", 32) as u16;
    for _ in 0..env_u64("IBDXNET_MESH_ROUNDS", 1) {
        let took = mesh(n, env_u64("IBDXNET_MESH_DEFAULTS", 0) != 0);
        assert!(took < BOUND, "{n} nodes: full mesh after {took:?}, bound {BOUND:?}");
    }
}

/// Connection churn without data: 16 nodes with room for 4 connections
/// each connect to one node after another (the idle ones are evicted, in
/// two-phase closes). Every connect succeeds, every close completes (none
/// runs into its deadline), and once the churn stops the control plane
/// falls silent (no packets bouncing between finished closes).
#[test]
fn connection_churn_completes_every_close_and_falls_silent() {
    let _ = env_logger::Builder::from_default_env().is_test(true).try_init();
    let n = env_u64("IBDXNET_CHURN_NODES", 16) as u16;
    let max = env_u64("IBDXNET_CHURN_MAX", 4) as u32;
    let engines = churn_engines(n, max, |c| c.connect_timeout = Duration::from_secs(2));
    let engines = Arc::new(engines);
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let engines = engines.clone();
            std::thread::spawn(move || {
                for k in 0..3 * u32::from(n) {
                    let j = (u32::from(i) + 1 + k % u32::from(n - 1)) % u32::from(n);
                    let t = Instant::now();
                    if let Err(e) = engines[usize::from(i)].connect(NodeId(j as u16)) {
                        panic!("node {i} → {j}: {e} after {:?}", t.elapsed());
                    }
                    std::thread::sleep(Duration::from_millis(25));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let sum = |k: &str| engines.iter().map(|e| stat(e, k)).sum::<u64>();
    // Past every close's deadline (the connect timeout, 2 s).
    std::thread::sleep(Duration::from_millis(2500));
    let out = sum("packets_out");
    std::thread::sleep(Duration::from_millis(500));
    let quiet = sum("packets_out") - out;
    eprintln!("churn: {}; {quiet} packets in the 500 ms after", close_counts(&sum));
    assert!(sum("connections_closed") > 0, "nothing was evicted");
    assert_eq!(sum("closes_timed_out"), 0, "orderly closes ran into their deadline");
    // Discovery rounds of nodes not heard from are the only packets allowed.
    assert!(quiet <= u64::from(n) * 2, "{quiet} packets in 500 ms after the churn stopped");
}

/// Issue 22: churn among many nodes, as the Java soak
/// (`SoakTest.noLossUnderConnectionChurnAmong64Nodes…`) drives it: 64
/// engines with room for 8 connections each, all their threads on one CPU,
/// two threads per engine that connect, in each 50 ms slot shared by all,
/// to one of the slot's 4 nodes (the next 4 after the previous slot's),
/// again and again for 6 s. Every connect succeeds, the slowest within 2 s
/// (the connect timeout is 10 s); the latencies of the connects that had to
/// wait are printed, with the slowest ones. Measured on one of 2 shared
/// cores: p99 56–65 ms, slowest 155–163 ms (unpinned: p99 29 ms, slowest
/// 72 ms; unpinned with every 10th control packet lost: slowest 414 ms).
///
/// This does not reproduce the soak's connects that were not established
/// within 10 s: those needed late exchanges after closes between two nodes
/// connecting to each other (`tests/stale_exchange.rs`), which connects
/// without data seldom produce. It bounds the latency of the churn itself.
///
/// `IBDXNET_CHURN_MANY_NODES` (default 64), `IBDXNET_CHURN_MANY_MAX` (8),
/// `IBDXNET_CHURN_MANY_FANOUT` (4), `IBDXNET_CHURN_MANY_SECS` (6),
/// `IBDXNET_CHURN_MANY_DROP_EVERY` (0: no control packet lost),
/// `IBDXNET_CHURN_MANY_ONE_CPU` (1).
#[test]
fn connection_churn_among_many_nodes_connects_within_a_bound() {
    let _ = env_logger::Builder::from_default_env().is_test(true).try_init();
    let n = env_u64("IBDXNET_CHURN_MANY_NODES", 64) as u16;
    let max = env_u64("IBDXNET_CHURN_MANY_MAX", 8) as u32;
    let fanout = env_u64("IBDXNET_CHURN_MANY_FANOUT", 4);
    let run_for = Duration::from_secs(env_u64("IBDXNET_CHURN_MANY_SECS", 6));
    const SLOT: Duration = Duration::from_millis(50);
    const THREADS: u64 = 2;
    if env_u64("IBDXNET_CHURN_MANY_ONE_CPU", 1) != 0 {
        // Every thread of this test on one CPU (threads inherit the mask):
        // the scheduling delays of a loaded host, reproducibly.
        let cpu = ibdxnet::sys::affinity::allowed_cpus().expect("affinity")[0];
        ibdxnet::sys::affinity::pin_current_thread(cpu).expect("pin");
    }
    let engines = churn_engines(n, max, |_| {});
    // Fault injection: every n-th control packet lost (0: none).
    let drop_every = env_u64("IBDXNET_CHURN_MANY_DROP_EVERY", 0) as u32;
    for e in &engines {
        e.manager().set_packet_loss(drop_every);
    }
    let engines = Arc::new(engines);
    let t0 = Instant::now();
    // Per connect that had to wait (the connection was not established when asked): (latency, from, to, at, error).
    type Connect = (Duration, u16, u16, Duration, Option<String>);
    let threads: Vec<_> = (0..u64::from(n) * THREADS)
        .map(|k| {
            let engines = engines.clone();
            std::thread::spawn(move || {
                let i = (k / THREADS) as u16;
                let mut seed = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut out: Vec<Connect> = Vec::new();
                let e = &engines[usize::from(i)];
                while t0.elapsed() < run_for {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let slot = (t0.elapsed().as_nanos() / SLOT.as_nanos()) as u64;
                    let j =
                        ((u64::from(i) + 1 + (slot * fanout + seed % fanout) % u64::from(n - 1)) % u64::from(n)) as u16;
                    if e.manager().established(NodeId(j)).is_some() {
                        // As a sender with data for it: the connection is in use.
                        let _ = e.connect(NodeId(j));
                    } else {
                        let at = t0.elapsed();
                        let t = Instant::now();
                        let r = e.connect(NodeId(j));
                        out.push((t.elapsed(), i, j, at, r.err().map(|e| e.to_string())));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                out
            })
        })
        .collect();
    let mut lat: Vec<Connect> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let sum = |k: &str| engines.iter().map(|e| stat(e, k)).sum::<u64>();
    lat.sort_by_key(|c| c.0);
    let pct = |p: usize| lat[(lat.len() - 1) * p / 100].0;
    let failed: Vec<&Connect> = lat.iter().filter(|c| c.4.is_some()).collect();
    eprintln!(
        "churn n={n} max={max} fanout={fanout} {run_for:?}: {} connects waited; latency p50 {:.1?} p90 {:.1?} p99 {:.1?} \
         max {:.1?}; {} ≥ 1 s, {} failed; {}, {} packets in",
        lat.len(),
        pct(50),
        pct(90),
        pct(99),
        lat[lat.len() - 1].0,
        lat.iter().filter(|c| c.0 >= Duration::from_secs(1)).count(),
        failed.len(),
        close_counts(&sum),
        sum("packets_in"),
    );
    for c in lat.iter().rev().take(8) {
        eprintln!("  slowest: {} → {} at {:.3?}: {:.3?} {:?}", c.1, c.2, c.3, c.0, c.4);
    }
    assert!(failed.is_empty(), "{} connects failed, first {:?}", failed.len(), failed[0]);
    let worst = lat[lat.len() - 1].0;
    assert!(worst < Duration::from_secs(2), "slowest connect {worst:?}");
}

/// The connection manager's counters a churn test reports, summed over its engines by `sum`.
fn close_counts(sum: &impl Fn(&str) -> u64) -> String {
    format!(
        "{} created, {} closed, {} drained, {} timed out, {} stale dropped, {} packets out",
        sum("connections_created"),
        sum("connections_closed"),
        sum("closes_drained"),
        sum("closes_timed_out"),
        sum("dropped_stale"),
        sum("packets_out"),
    )
}
