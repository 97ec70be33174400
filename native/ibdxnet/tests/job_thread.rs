//! The connection manager's job thread sleeps until its next timer, a packet
//! or a job: an idle node with connected peers wakes about once a second
//! (`job_wakeups`), not 50 times (the old 20 ms receive timeout), and work
//! posted while it sleeps (a connect, an orderly close) is done at once, not
//! at the end of the sleep.

mod common;

use std::time::{Duration, Instant};

use common::engine::{base_config, start_nodes, wait_until, Node};

use ibdxnet::con::NodeId;
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, SimOptions};
use ibdxnet::loopback::StreamOptions;

fn stat(n: &Node<SimFabric>, key: &str) -> u64 {
    n.engine.stats_map().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v).unwrap()
}

fn nodes(n: u16) -> Vec<Node<SimFabric>> {
    let net = SimNetwork::new();
    start_nodes(n, StreamOptions::default(), |i| {
        let mut c = base_config(i, FabricKind::Sim);
        c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
        c
    })
}

#[test]
fn an_idle_manager_with_connected_peers_wakes_at_most_a_few_times_a_second() {
    let nodes = nodes(4);
    let mut held = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        for j in 0..nodes.len() {
            if i != j {
                held.push(n.engine.connect(NodeId(j as u16)).expect("connect"));
            }
        }
    }
    // Let the set-up's last answers settle.
    std::thread::sleep(Duration::from_millis(300));
    let before: Vec<u64> = nodes.iter().map(|n| stat(n, "job_wakeups")).collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let secs = t0.elapsed().as_secs_f64();
    for (i, n) in nodes.iter().enumerate() {
        let woke = stat(n, "job_wakeups") - before[i];
        let per_s = woke as f64 / secs;
        // One timer wake a second, plus slack for a late packet.
        assert!(
            per_s <= 3.0,
            "node {i}: {woke} wake-ups in {secs:.1} s ({per_s:.1}/s); stats {:?}",
            n.engine.stats_map()
        );
    }
    assert!(held.iter().all(|c| c.is_established()));
}

#[test]
fn work_posted_to_a_sleeping_manager_is_done_at_once() {
    let nodes = nodes(3);
    let c = nodes[0].engine.connect(NodeId(1)).expect("connect");
    drop(c);
    // Both job threads are asleep (up to a second) now.
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    let c = nodes[0].engine.connect(NodeId(2)).expect("connect");
    let connect = t0.elapsed();
    drop(c);
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    assert!(nodes[1].engine.manager().close(NodeId(0), false));
    wait_until("the orderly close drained", || stat(&nodes[1], "closes_drained") >= 1);
    let close = t0.elapsed();
    // The sleep is a second; both must finish well before it ends.
    assert!(connect < Duration::from_millis(300), "a connect to a sleeping pair took {connect:?}");
    assert!(close < Duration::from_millis(300), "an orderly close between sleeping nodes took {close:?}");
}
