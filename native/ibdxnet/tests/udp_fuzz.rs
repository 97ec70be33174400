//! Hostile UDP input to a running engine's connection manager (on sim):
//! random bytes, truncated and mutated packets, unknown source ids, wrong
//! destination ids, packets forging a known node (another instance id, a
//! close of its queue pair) and stale closes, all sent over a real UDP
//! socket while two nodes stream to each other. Every datagram is counted
//! by exactly one drop counter of the statistics map, the connection is
//! never replaced, and the streams stay intact.
//!
//! The discovery path (protocol 7: probes to any node, answers from
//! candidate addresses) gets its own hostile datagrams: random, truncated,
//! mutated probes and answers with random ids, from a stranger (no key) and
//! from a candidate address without the key (key); each is counted exactly
//! once, as dropped or as an answered probe, and none creates state (the
//! node table, the candidate list and the connection stay as they were).
//!
//! The default run sends 200 000 datagrams; `IBDXNET_FUZZ_DATAGRAMS`
//! overrides it, and the `#[ignore]`d `udp_fuzz_long_1m` sends 10^6
//! (`cargo test --release --test udp_fuzz -- --ignored`).

mod common;

use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use common::engine::{base_config, start_nodes, wait_until, Node};
use common::records::Rng;
use ibdxnet::con::proto::{Body, Packet};
use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, Gid, QpEndpoint, SimOptions};
use ibdxnet::loopback::StreamOptions;

/// Node id of a pretend node whose table address is the fuzzer's socket.
const FAKE: NodeId = NodeId(0x7A7A);
/// Datagrams sent before waiting for the manager to count them (keeps the
/// socket's receive buffer from overflowing, so the count is exact).
const BURST: u64 = 64;

const DROPS: [&str; 5] =
    ["dropped_malformed", "dropped_foreign", "dropped_spoofed", "dropped_stale", "dropped_unauthenticated"];

fn drops(stats: &HashMap<&'static str, u64>) -> u64 {
    DROPS.iter().map(|k| stats[k]).sum()
}

fn stats_of(n: &Node<SimFabric>) -> HashMap<&'static str, u64> {
    n.engine.stats_map().into_iter().collect()
}

/// One hostile datagram of category `i % 7` into `out`.
fn hostile(rng: &mut Rng, i: u64, real_qpn: u32, real_instance: u32, out: &mut Vec<u8>) {
    let forged_instance = loop {
        let x = rng.next() as u32;
        if x != real_instance {
            break x;
        }
    };
    let endpoint = QpEndpoint {
        qpn: (rng.below(0xFF_FFFF) + 1) as u32,
        psn: rng.below(0x100_0000) as u32,
        lid: rng.next() as u16,
        gid: Gid([rng.next() as u8; 16]),
        mtu: 4096,
        sim_addr: rng.below(64),
        sim_network: rng.below(4),
    };
    let body = match rng.below(5) {
        0 => Body::Discover,
        1 => Body::DiscoverAck,
        2 => {
            // Now and then a flow-control unit out of range: malformed, counted as such.
            let flow_unit = if rng.below(8) == 0 { rng.next() | (1 << 63) } else { 1 << 20 };
            Body::Exchange { endpoint, peer_qpn: real_qpn, established: rng.below(2) == 1, flow_unit }
        }
        3 => Body::Done { qpn: endpoint.qpn, peer_qpn: real_qpn },
        _ => Body::Close { qpn: real_qpn },
    };
    let forged = Packet { src: NodeId(1), dst: NodeId(0), instance: forged_instance, body };
    out.clear();
    match i % 7 {
        // Random bytes.
        0 => {
            let len = rng.below(80) as usize;
            out.extend((0..len).map(|_| rng.next() as u8));
        }
        // Truncated.
        1 => {
            forged.encode(out);
            let keep = rng.below(out.len() as u64) as usize;
            out.truncate(keep);
        }
        // Unknown source id.
        2 => Packet { src: NodeId(100 + rng.below(30_000) as u16), ..forged }.encode(out),
        // Wrong destination id.
        3 => Packet { dst: NodeId(1 + rng.below(60_000) as u16), ..forged }.encode(out),
        // A known node forged from another address, with another instance id.
        4 => forged.encode(out),
        // Mutations of the forged packet.
        5 => {
            forged.encode(out);
            for _ in 0..(rng.below(4) + 1) {
                let at = rng.below(out.len() as u64) as usize;
                out[at] = rng.next() as u8;
            }
        }
        // Closes (either phase) from the pretend node, which has no connection: stale.
        _ => {
            let body = if rng.below(2) == 0 {
                Body::Close { qpn: real_qpn }
            } else {
                Body::Done { qpn: endpoint.qpn, peer_qpn: real_qpn }
            };
            Packet { src: FAKE, dst: NodeId(0), instance: rng.next() as u32, body }.encode(out)
        }
    }
}

/// `keyed`: both nodes have a pre-shared key (the fuzzer has not), so what
/// was stale without a key is unauthenticated.
fn fuzz(datagrams: u64, keyed: bool) {
    let net = SimNetwork::new();
    let key = keyed.then(|| ibdxnet::con::AuthKey::new(b"udp fuzz key 0123456789", "test").unwrap());
    let nodes: Vec<Node<SimFabric>> =
        start_nodes(2, StreamOptions { verify: true, limit: None, ..Default::default() }, |i| {
            let mut c = base_config(i, FabricKind::Sim);
            c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
            c.auth_key = key.clone();
            c
        });
    let fuzzer = UdpSocket::bind("127.0.0.1:0").unwrap();
    nodes[0].engine.add_node(FAKE, fuzzer.local_addr().unwrap()).unwrap();
    let mut held = Vec::new();
    for (i, j) in [(0usize, 1u16), (1, 0)] {
        let c = nodes[i].engine.connect(NodeId(j)).expect("connect");
        // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
        unsafe { nodes[i].handler.add_target(NodeId(j), c.ring().address(), c.ring().size()) };
        held.push(c);
    }
    let conn = nodes[0].engine.manager().established(NodeId(1)).unwrap();
    let (real_qpn, real_instance) = (conn.peer_qpn(), conn.peer_instance());
    let target = nodes[0].engine.manager().local_addr();
    wait_until("data flows", || nodes[0].handler.received.load(Relaxed) > (1 << 20));

    let base = stats_of(&nodes[0]);
    let t0 = Instant::now();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut buf = Vec::with_capacity(128);
    let mut sent = 0u64;
    while sent < datagrams {
        let burst = BURST.min(datagrams - sent);
        for _ in 0..burst {
            hostile(&mut rng, sent, real_qpn, real_instance, &mut buf);
            fuzzer.send_to(&buf, target).expect("send");
            sent += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while drops(&stats_of(&nodes[0])) - drops(&base) < sent {
            assert!(Instant::now() < deadline, "after {sent} datagrams only {} were counted", {
                drops(&stats_of(&nodes[0])) - drops(&base)
            });
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    let took = t0.elapsed();
    let after = stats_of(&nodes[0]);
    let delta = |k: &str| after[k] - base[k];
    eprintln!(
        "udp fuzz (key: {keyed}): {sent} datagrams in {took:.2?} ({:.0}/s): malformed {}, foreign {}, spoofed {}, \
         stale {}, unauthenticated {}",
        sent as f64 / took.as_secs_f64(),
        delta("dropped_malformed"),
        delta("dropped_foreign"),
        delta("dropped_spoofed"),
        delta("dropped_stale"),
        delta("dropped_unauthenticated"),
    );
    assert_eq!(drops(&after) - drops(&base), sent, "every datagram counted as dropped exactly once");
    let last = if keyed { "dropped_unauthenticated" } else { "dropped_stale" };
    for k in ["dropped_malformed", "dropped_foreign", "dropped_spoofed", last] {
        assert!(delta(k) >= sent / 8, "{k}: {} of {sent}", delta(k));
    }

    // The connection was neither replaced nor closed, and data still flows
    // intact both ways.
    let now = nodes[0].engine.manager().established(NodeId(1)).expect("still established");
    assert_eq!((now.local_qpn(), now.peer_qpn(), now.peer_instance()), (conn.local_qpn(), real_qpn, real_instance));
    for n in &nodes {
        let before = n.handler.received.load(Relaxed);
        wait_until("data still flows", || n.handler.received.load(Relaxed) > before + (4 << 20));
        assert!(
            !n.handler.events().iter().any(|e| matches!(e, NodeEvent::Disconnected(_))),
            "{:?}",
            n.handler.events()
        );
    }
    for n in &nodes {
        n.handler.stop_sending();
    }
    for (i, n) in nodes.iter().enumerate() {
        let s = &n.handler.incoming()[&(1 - i as u16)];
        assert_eq!(s.corrupt, 0, "node {i}: corrupt or reordered bytes");
        assert!(s.bytes > 0);
        assert_eq!(stats_of(n)["errors"], 0);
    }
    drop(held);
}

fn datagrams_from_env(default: u64) -> u64 {
    std::env::var("IBDXNET_FUZZ_DATAGRAMS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn hostile_datagrams_are_counted_and_dropped_while_data_flows() {
    fuzz(datagrams_from_env(200_000), false);
}

/// The same with a key on both nodes.
#[test]
fn with_a_key_hostile_datagrams_are_counted_and_dropped_while_data_flows() {
    fuzz(datagrams_from_env(50_000), true);
}

/// The long variant: 10^6 datagrams.
#[test]
#[ignore]
fn udp_fuzz_long_1m() {
    fuzz(datagrams_from_env(1_000_000), false);
}

// ---- the discovery path -----------------------------------------------------

/// One hostile datagram at the discovery path.
fn hostile_discovery(rng: &mut Rng, i: u64, out: &mut Vec<u8>) {
    let src = NodeId(rng.below(4) as u16); // 0 is the target's own id, 1 its peer
    let probe = Packet { src, dst: ibdxnet::con::proto::ANY, instance: rng.next() as u32, body: Body::Discover };
    let answer = Packet { dst: NodeId(rng.below(3) as u16), body: Body::DiscoverAck, ..probe };
    let base = if rng.below(2) == 0 { probe } else { answer };
    out.clear();
    match i % 5 {
        0 => {
            // Random bytes, half of them behind a valid magic, version and type.
            if rng.below(2) == 0 {
                base.encode(out);
                out.truncate(6);
            }
            let len = rng.below(60) as usize;
            out.extend((0..len).map(|_| rng.next() as u8));
        }
        1 => {
            base.encode(out);
            let keep = rng.below(out.len() as u64) as usize;
            out.truncate(keep);
        }
        2 => Packet { src: NodeId(rng.below(0xFFFF) as u16), ..probe }.encode(out),
        3 => Packet { src: NodeId(rng.below(0xFFFF) as u16), ..answer }.encode(out),
        _ => {
            base.encode(out);
            for _ in 0..(rng.below(4) + 1) {
                let at = rng.below(out.len() as u64) as usize;
                out[at] = rng.next() as u8;
            }
        }
    }
}

/// Everything a datagram can be counted as at the discovery path.
fn handled(stats: &HashMap<&'static str, u64>) -> u64 {
    stats.iter().filter(|(k, _)| k.starts_with("dropped_") || **k == "discover_answered").map(|(_, v)| *v).sum()
}

/// `keyed`: both nodes have a key and the fuzzer, without it, sends from a
/// candidate address of node 0; otherwise it is a stranger.
fn fuzz_discovery(datagrams: u64, keyed: bool) {
    let net = SimNetwork::new();
    let key = keyed.then(|| ibdxnet::con::AuthKey::new(b"udp fuzz key 0123456789", "test").unwrap());
    let nodes: Vec<Node<SimFabric>> = (0..2u16)
        .map(|i| {
            let mut c = base_config(i, FabricKind::Sim);
            c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
            c.auth_key = key.clone();
            c.discovery_interval = Duration::from_millis(50);
            let h = ibdxnet::loopback::StreamHandler::new(NodeId(i), StreamOptions::default());
            let e = ibdxnet::msgrc::Engine::<SimFabric>::start(c, h.clone()).expect("start");
            h.set_pool(e.buffer_pool());
            Node { engine: e, handler: h }
        })
        .collect();
    let (a0, a1) = (nodes[0].engine.manager().local_addr(), nodes[1].engine.manager().local_addr());
    nodes[0].engine.add_address(a1).unwrap();
    nodes[1].engine.add_address(a0).unwrap();
    wait_until("node 1 discovered by address", || nodes[0].engine.manager().nodes() == vec![(NodeId(1), a1)]);
    let conn = nodes[0].engine.connect(NodeId(1)).expect("connect");
    let fuzzer = UdpSocket::bind("127.0.0.1:0").unwrap();
    if keyed {
        nodes[0].engine.add_address(fuzzer.local_addr().unwrap()).unwrap();
    }
    let m = nodes[0].engine.manager();
    let (table, cands) = (m.nodes(), m.addresses());
    let base = stats_of(&nodes[0]);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut buf = Vec::with_capacity(128);
    let mut sent = 0u64;
    let t0 = Instant::now();
    while sent < datagrams {
        let burst = BURST.min(datagrams - sent);
        for _ in 0..burst {
            hostile_discovery(&mut rng, sent, &mut buf);
            fuzzer.send_to(&buf, a0).expect("send");
            sent += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        // Node 0's own probes to the fuzzer (keyed) are not datagrams it receives.
        while handled(&stats_of(&nodes[0])) - handled(&base) < sent {
            assert!(Instant::now() < deadline, "after {sent} datagrams only {} were counted", {
                handled(&stats_of(&nodes[0])) - handled(&base)
            });
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    let after = stats_of(&nodes[0]);
    let delta = |k: &str| after[k] - base[k];
    eprintln!(
        "discovery fuzz (key: {keyed}): {sent} datagrams in {:.2?}: answered {}, over the rate {}, own id {}, \
         foreign probes {}, malformed {}, foreign {}, spoofed {}, unauthenticated {}",
        t0.elapsed(),
        delta("discover_answered"),
        delta("dropped_probe_rate"),
        delta("dropped_own_id"),
        delta("dropped_probe_foreign"),
        delta("dropped_malformed"),
        delta("dropped_foreign"),
        delta("dropped_spoofed"),
        delta("dropped_unauthenticated"),
    );
    assert_eq!(handled(&after) - handled(&base), sent, "every datagram counted exactly once");
    assert_eq!(delta("discovered_by_address"), 0);
    let mut now_table = m.nodes();
    now_table.sort();
    let mut was = table.clone();
    was.sort();
    assert_eq!(now_table, was, "no node entered or removed");
    let mut now_cands = m.addresses();
    now_cands.sort();
    let mut was = cands.clone();
    was.sort();
    assert_eq!(now_cands, was, "no candidate bound");
    let still = m.established(NodeId(1)).expect("still established");
    assert_eq!((still.local_qpn(), still.peer_instance()), (conn.local_qpn(), conn.peer_instance()));
    assert!(nodes[0].engine.is_running());
}

#[test]
fn hostile_datagrams_at_the_discovery_path_create_no_state() {
    fuzz_discovery(datagrams_from_env(50_000), false);
}

#[test]
fn with_a_key_hostile_datagrams_from_a_candidate_address_create_no_state() {
    fuzz_discovery(datagrams_from_env(50_000), true);
}
