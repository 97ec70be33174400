//! Fault soak on sim: 3 nodes stream sequence-numbered, checksummed records
//! of random sizes all-to-all while faults are injected at random (delay,
//! bandwidth limits, link cuts shorter than the retry budget) on top of a
//! tiny shared receive queue (receiver not ready all the time) and a send
//! queue of 4 (full for long stretches). Per sender and receiver: 0 lost,
//! 0 duplicated, 0 reordered, checksums intact.
//!
//! The default run injects faults for 6 s; `IBDXNET_SOAK_SECONDS` sets the
//! duration (`./ibdxnet bench soak`).

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::engine::{base_config, start_engines, wait_until};
use common::records::{RecordHandler, Rng};
use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, SimOptions};

const NODES: u16 = 3;
/// Link cuts stay well inside this.
const RETRY_BUDGET: Duration = Duration::from_secs(2);

fn soak_duration() -> Duration {
    let secs = std::env::var("IBDXNET_SOAK_SECONDS").ok().and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(6);
    Duration::from_secs(secs.max(1))
}

#[derive(Debug, Default)]
struct Injected {
    delays: u64,
    throttles: u64,
    cuts: u64,
}

/// Injects one random fault at a time into random devices until `stop`.
fn inject(devices: &[SimFabric], stop: &AtomicBool, seed: u64) -> Injected {
    let mut rng = Rng(seed);
    let mut n = Injected::default();
    let ms = |m: u64| Duration::from_millis(m);
    while !stop.load(Relaxed) {
        let dev = &devices[rng.below(devices.len() as u64) as usize];
        let hold = ms(20 + rng.below(130));
        match rng.below(3) {
            0 => {
                dev.set_delay(Duration::from_micros(50 + rng.below(3000)));
                n.delays += 1;
                std::thread::sleep(hold);
                dev.set_delay(Duration::ZERO);
            }
            1 => {
                dev.set_bandwidth(Some((20 + rng.below(300)) << 20));
                n.throttles += 1;
                std::thread::sleep(hold);
                dev.set_bandwidth(None);
            }
            _ => {
                dev.set_link_up(false);
                n.cuts += 1;
                std::thread::sleep(ms(5 + rng.below(100)));
                dev.set_link_up(true);
            }
        }
        std::thread::sleep(ms(5 + rng.below(40)));
    }
    n
}

#[test]
fn all_to_all_records_survive_faults_without_loss_duplication_or_reordering() {
    let duration = soak_duration();
    let net = SimNetwork::new();
    net.set_retry_budget(RETRY_BUDGET);
    let nodes = start_engines::<SimFabric, _>(
        NODES,
        |i| RecordHandler::new(NodeId(i), 0xC0FFEE + u64::from(i)),
        |i| {
            let mut c = base_config(i, FabricKind::Sim);
            c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
            // A tiny shared receive queue: senders hit receiver-not-ready.
            c.recv_buffer_size = 8192;
            c.recv_sges_per_wr = 2;
            c.srq_size = 8;
            c.recv_buffer_count = 48;
            c.incoming_ring_size = 32;
            // A tiny send queue: behind delays and throttling it is full for
            // long stretches, and the rest of each package is offered again.
            c.sq_size = 4;
            c.signal_interval = 2;
            c
        },
    );
    for (e, h) in &nodes {
        h.set_pool(e.buffer_pool());
    }
    let mut held = Vec::new();
    for (i, (e, h)) in nodes.iter().enumerate() {
        for j in 0..NODES {
            if usize::from(j) != i {
                let c = e.connect(NodeId(j)).expect("connect");
                // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
                unsafe { h.add_target(NodeId(j), c.ring().address(), c.ring().size()) };
                held.push(c);
            }
        }
    }
    let devices: Vec<SimFabric> = nodes.iter().map(|(e, _)| e.manager().queues().fabric.clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let injector = {
        let (devices, stop) = (devices.clone(), stop.clone());
        std::thread::spawn(move || inject(&devices, &stop, 0x5EED_1234_ABCD))
    };
    std::thread::sleep(duration);
    stop.store(true, Relaxed);
    let injected = injector.join().unwrap();
    for (_, h) in &nodes {
        h.stop_generating();
    }
    // Drain: everything written is confirmed and every record verified.
    for (i, (e, h)) in nodes.iter().enumerate() {
        wait_until(&format!("node {i}: all confirmed ({:?})", e.stats_map()), || h.all_confirmed());
    }
    let mut verified = 0u64;
    for (i, (_, h)) in nodes.iter().enumerate() {
        for (j, (_, peer)) in nodes.iter().enumerate() {
            if i == j {
                continue;
            }
            let sent = peer.sent()[&(i as u16)];
            wait_until(&format!("node {i}: all {sent} records from {j}"), || {
                h.received_from().get(&(j as u16)).is_some_and(|r| r.verified + r.bad_checksum >= sent)
            });
            let r = &h.received_from()[&(j as u16)];
            let what = format!("{j} → {i}: {r:?}");
            assert_eq!(r.corrupt, 0, "framing lost, {what}");
            assert_eq!(r.bad_checksum, 0, "checksum, {what}");
            assert!(r.missing.is_empty(), "lost, {what}");
            assert_eq!(r.duplicated, 0, "duplicated, {what}");
            assert_eq!(r.reordered, 0, "reordered, {what}");
            assert_eq!((r.verified, r.expected), (sent, sent), "count, {what}");
            verified += r.verified;
        }
    }
    for (i, (e, h)) in nodes.iter().enumerate() {
        assert!(!h.events().iter().any(|ev| matches!(ev, NodeEvent::Disconnected(_))), "node {i}: {:?}", h.events());
        let stats: std::collections::HashMap<_, _> = e.stats_map().into_iter().collect();
        assert_eq!(stats["errors"], 0, "node {i}: {stats:?}");
    }
    let faults = injected.delays + injected.throttles + injected.cuts;
    let send_queue_full: u64 = nodes.iter().map(|(_, h)| h.not_posted_reports.load(Relaxed)).sum();
    eprintln!(
        "soak: {:.1?}, {verified} records verified (0 lost, 0 duplicated, 0 reordered, checksums intact), \
         {faults} faults injected ({} delays, {} bandwidth limits, {} link cuts < {RETRY_BUDGET:?}), \
         send queue of 4 full {send_queue_full} times",
        t0.elapsed(),
        injected.delays,
        injected.throttles,
        injected.cuts,
    );
    assert!(injected.cuts > 0 && verified > 0);
    assert!(send_queue_full > 0, "the send queue of 4 never filled");
    drop(held);
}
