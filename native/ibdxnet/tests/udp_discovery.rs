//! Discovery by address (protocol 7): managers given only each other's
//! UDP addresses (`add_address`, as upstream DXNet's `addNode(ipv4)`) learn
//! the node ids from the answers to their probes, enter them into the node
//! table and connect as usual; a node lost and restarted at the same
//! address (also with another id) is rediscovered.
//!
//! The adversarial half uses plain UDP sockets: a socket registered as a
//! candidate address is "a node at that address"; one that is not is a
//! stranger. Answers from strangers, answers claiming our own id or an id
//! bound to another address, and probes from anybody create no state; with
//! a key, an unkeyed or wrongly keyed node is never entered, and a key
//! holder at a candidate address must answer the instance challenge.

mod common;

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::engine::{base_config, wait_until, Node};
use hmac::{Hmac, Mac};
use ibdxnet::con::proto::{Body, Packet, ANY, VERSION_KEYED};
use ibdxnet::con::{AuthKey, ConError, NodeError, NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, SimOptions};
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::{Engine, EngineConfig};
use sha2::Sha256;

const KEY: &[u8] = b"udp-discovery test key 0123456789";
const OTHER_KEY: &[u8] = b"another discovery key 9876543210";
const INTERVAL: Duration = Duration::from_millis(50);

fn config(id: u16, net: &Arc<SimNetwork>, key: Option<&[u8]>, listen: Option<SocketAddr>) -> EngineConfig {
    let mut c = base_config(id, FabricKind::Sim);
    c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
    c.auth_key = key.map(|k| AuthKey::new(k, "test").unwrap());
    c.discovery_interval = INTERVAL;
    c.exchange_retry = Duration::from_millis(20);
    if let Some(l) = listen {
        c.listen = l;
    }
    c
}

/// One engine whose node table is empty.
fn start(cfg: EngineConfig) -> Node<SimFabric> {
    let _ = env_logger::Builder::from_default_env().is_test(true).try_init();
    let handler = StreamHandler::new(cfg.node_id, StreamOptions::default());
    let engine = Engine::<SimFabric>::start(cfg, handler.clone()).expect("engine start");
    handler.set_pool(engine.buffer_pool());
    Node { engine, handler }
}

fn addr(n: &Node<SimFabric>) -> SocketAddr {
    n.engine.manager().local_addr()
}

fn table(n: &Node<SimFabric>) -> HashMap<NodeId, SocketAddr> {
    n.engine.manager().nodes().into_iter().collect()
}

fn stat(n: &Node<SimFabric>, k: &str) -> u64 {
    n.engine.stats_map().into_iter().find(|e| e.0 == k).map_or(0, |e| e.1)
}

/// Every node is given every node's address (its own too: ignored).
fn introduce(nodes: &[Node<SimFabric>]) {
    for n in nodes {
        for m in nodes {
            n.engine.add_address(addr(m)).expect("add_address");
        }
    }
}

fn connect_all(nodes: &[Node<SimFabric>]) {
    for n in nodes {
        for m in nodes {
            let id = m.engine.node_id();
            if id != n.engine.node_id() {
                n.engine.connect(id).unwrap_or_else(|e| panic!("{} → {id}: {e}", n.engine.node_id()));
            }
        }
    }
}

fn wait_discovered(nodes: &[Node<SimFabric>]) {
    for n in nodes {
        for m in nodes.iter().filter(|m| m.engine.node_id() != n.engine.node_id()) {
            wait_until("discovered by address", || table(n).get(&m.engine.node_id()) == Some(&addr(m)));
        }
    }
}

#[test]
fn two_managers_discover_each_other_by_address_only() {
    let net = SimNetwork::new();
    let nodes = [start(config(0, &net, None, None)), start(config(1, &net, None, None))];
    introduce(&nodes);
    wait_discovered(&nodes);
    for (n, other) in [(&nodes[0], 1), (&nodes[1], 0)] {
        wait_until("Discovered event", || n.handler.events().contains(&NodeEvent::Discovered(NodeId(other))));
        assert_eq!(table(n).len(), 1, "exactly the other node");
        assert_eq!(stat(n, "discovered_by_address"), 1);
        assert!(stat(n, "discover_probes") >= 1);
        assert_eq!(n.engine.manager().addresses(), vec![(addr(&nodes[other as usize]), Some(NodeId(other)))]);
    }
    connect_all(&nodes);
}

/// With a discovery interval of a minute, an address is still probed as
/// soon as it is added; before, a connect fails at once naming the node.
#[test]
fn an_added_address_is_probed_at_once() {
    let net = SimNetwork::new();
    let slow = |i| EngineConfig { discovery_interval: Duration::from_secs(60), ..config(i, &net, None, None) };
    let nodes = [start(slow(0)), start(slow(1))];
    std::thread::sleep(Duration::from_millis(100)); // the first (empty) discovery round is over
    let t0 = Instant::now();
    let refused = nodes[0].engine.connect(NodeId(1));
    assert!(matches!(refused, Err(ConError::UnknownNode(NodeId(1)))), "{refused:?}");
    assert!(t0.elapsed() < Duration::from_secs(1));
    introduce(&nodes);
    wait_discovered(&nodes);
    assert!(t0.elapsed() < Duration::from_secs(5), "discovered after {:?}", t0.elapsed());
    connect_all(&nodes);
}

#[test]
fn three_managers_discover_each_other_by_address_only() {
    let net = SimNetwork::new();
    let nodes: Vec<_> = [4, 9, 200].into_iter().map(|i| start(config(i, &net, None, None))).collect();
    introduce(&nodes);
    wait_discovered(&nodes);
    connect_all(&nodes);
    for n in &nodes {
        assert_eq!(table(n).len(), 2);
        assert_eq!(n.engine.manager().addresses().len(), 2, "own address not a candidate");
    }
}

/// Our own listen address, and with a wildcard listen address our own
/// port on a loopback address, are ignored; addresses naming no peer are refused.
#[test]
fn own_address_is_filtered_and_unspecified_addresses_refused() {
    let net = SimNetwork::new();
    let n = start(config(0, &net, None, None));
    n.engine.add_address(addr(&n)).expect("own address: ignored, not an error");
    let wild = start(config(1, &net, None, Some("0.0.0.0:0".parse().unwrap())));
    let port = addr(&wild).port();
    wild.engine.add_address(SocketAddr::from(([127, 0, 0, 1], port))).expect("ignored");
    for a in ["0.0.0.0:5730", "127.0.0.1:0"] {
        let a: SocketAddr = a.parse().unwrap();
        assert_eq!(n.engine.add_address(a), Err(NodeError::NoPeerAddress(a)));
    }
    std::thread::sleep(INTERVAL * 4);
    for m in [&n, &wild] {
        assert!(m.engine.manager().addresses().is_empty());
        assert_eq!(stat(m, "discover_probes"), 0, "never probes itself");
        assert!(table(m).is_empty());
    }
}

/// Node 1 goes away and a new instance starts at its address: first with
/// the same id (rediscovered, connectable), then with another id (the
/// table follows, the old id is invalidated).
fn restart_case(key: Option<&[u8]>) {
    let net = SimNetwork::new();
    let n0 = start(config(0, &net, key, None));
    let n1 = start(config(1, &net, key, None));
    let (a0, a1) = (addr(&n0), addr(&n1));
    n0.engine.add_address(a1).unwrap();
    n1.engine.add_address(a0).unwrap();
    wait_until("node 1 discovered", || table(&n0).get(&NodeId(1)) == Some(&a1));
    let old_instance = n0.engine.connect(NodeId(1)).expect("connect").peer_instance();
    let discovered = |id: u16| n0.handler.events().iter().filter(|e| **e == NodeEvent::Discovered(NodeId(id))).count();
    assert_eq!(discovered(1), 1);

    n1.engine.shutdown();
    let n1 = start(config(1, &net, key, Some(a1)));
    n1.engine.add_address(a0).unwrap();
    wait_until("node 1 rediscovered", || discovered(1) == 2);
    let c = n0.engine.connect(NodeId(1)).expect("connect to the new instance");
    assert_ne!(c.peer_instance(), old_instance);
    n1.engine.connect(NodeId(0)).expect("and back");
    drop(c);

    n1.engine.shutdown();
    let n2 = start(config(2, &net, key, Some(a1)));
    n2.engine.add_address(a0).unwrap();
    wait_until("node 2 discovered at node 1's address", || table(&n0).get(&NodeId(2)) == Some(&a1));
    assert_eq!(table(&n0).len(), 1, "node 1 is gone from the table: {:?}", table(&n0));
    wait_until("Invalidated(1)", || n0.handler.events().contains(&NodeEvent::Invalidated(NodeId(1))));
    wait_until("Discovered(2)", || discovered(2) == 1);
    assert_eq!(stat(&n0, "discovery_replaced"), 1);
    assert_eq!(n0.engine.manager().addresses(), vec![(a1, Some(NodeId(2)))]);
    n0.engine.connect(NodeId(2)).expect("connect to node 2");
    n2.engine.connect(NodeId(0)).expect("node 2 connects back");
    assert!(n0.engine.connect_timeout(NodeId(1), Duration::from_millis(50)).is_err());
}

#[test]
fn a_lost_node_is_rediscovered_after_a_restart_also_with_another_id() {
    restart_case(None);
}

#[test]
fn with_a_key_a_lost_node_is_rediscovered_after_a_restart_also_with_another_id() {
    restart_case(Some(KEY));
}

/// Keyed nodes discover each other; a node with another key, and one
/// without a key, at candidate addresses are never entered (nor enter).
#[test]
fn with_a_key_a_wrongly_keyed_or_unkeyed_node_is_never_entered() {
    let net = SimNetwork::new();
    let nodes = [
        start(config(0, &net, Some(KEY), None)),
        start(config(1, &net, Some(KEY), None)),
        start(config(2, &net, Some(OTHER_KEY), None)),
        start(config(3, &net, None, None)),
    ];
    introduce(&nodes);
    wait_discovered(&nodes[..2]);
    std::thread::sleep(INTERVAL * 20);
    assert_eq!(table(&nodes[0]).keys().collect::<Vec<_>>(), vec![&NodeId(1)]);
    assert_eq!(table(&nodes[1]).keys().collect::<Vec<_>>(), vec![&NodeId(0)]);
    assert!(table(&nodes[2]).is_empty() && table(&nodes[3]).is_empty());
    for n in &nodes {
        assert!(stat(n, "dropped_unauthenticated") > 0, "node {}", n.engine.node_id());
    }
    assert_eq!(stat(&nodes[0], "discovered_by_address"), 1);
}

// ---- the adversary with plain UDP sockets ---------------------------------

fn socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    s
}

fn send(s: &UdpSocket, to: SocketAddr, p: Packet) {
    let mut b = Vec::new();
    p.encode(&mut b);
    s.send_to(&b, to).unwrap();
}

/// `p` sealed with `key` and sequence number `seq`.
fn sealed(key: &[u8], p: &Packet, seq: u64) -> Vec<u8> {
    let mut out = Vec::new();
    p.encode(&mut out);
    out[4] = VERSION_KEYED;
    out.extend_from_slice(&seq.to_be_bytes());
    let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
    m.update(&out);
    out.extend_from_slice(&m.finalize().into_bytes());
    out
}

/// The next packet `s` receives that `want` accepts, within `limit`.
fn next(s: &UdpSocket, limit: Duration, want: impl Fn(&Packet) -> bool) -> Option<Packet> {
    let t0 = Instant::now();
    let mut b = [0u8; 512];
    while t0.elapsed() < limit {
        if let Ok((n, _)) = s.recv_from(&mut b) {
            if let Ok((p, _)) = Packet::decode_any(&b[..n]) {
                if want(&p) {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// Waits (at most 10 s: counters move within milliseconds) for counter `k` to reach `at_least`.
fn wait_stat(n: &Node<SimFabric>, k: &str, at_least: u64) {
    let t0 = Instant::now();
    while stat(n, k) < at_least {
        assert!(t0.elapsed() < Duration::from_secs(10), "{k} = {}, expected at least {at_least}", stat(n, k));
        std::thread::sleep(Duration::from_millis(2));
    }
}

const P: Packet = Packet { src: NodeId(7), dst: NodeId(0), instance: 55, body: Body::DiscoverAck };

/// Without a key: only an answer from a candidate address enters a node;
/// answers from strangers, claiming our own id or an id the table has at
/// another address, other packets and probes enter nothing.
#[test]
fn only_an_answer_from_a_candidate_address_enters_a_node() {
    let net = SimNetwork::new();
    let nodes = [start(config(0, &net, None, None)), start(config(1, &net, None, None))];
    introduce(&nodes);
    wait_discovered(&nodes);
    let n0 = &nodes[0];
    let (a0, a1) = (addr(n0), addr(&nodes[1]));
    let before = table(n0);

    // A stranger's answer.
    let stranger = socket();
    let foreign = stat(n0, "dropped_foreign");
    send(&stranger, a0, P);
    std::thread::sleep(INTERVAL);
    assert!(!table(n0).contains_key(&NodeId(7)), "a stranger's answer entered");
    wait_stat(n0, "dropped_foreign", foreign + 1);

    // A candidate address: it is probed (a Discover to any node).
    let cand = socket();
    let ca = cand.local_addr().unwrap();
    n0.engine.add_address(ca).unwrap();
    let probe = next(&cand, Duration::from_secs(5), |p| p.body == Body::Discover).expect("probed");
    assert_eq!((probe.src, probe.dst), (NodeId(0), ANY));
    // ... answering with our own id, an id bound elsewhere, another packet type.
    send(&cand, a0, Packet { src: NodeId(0), ..P });
    std::thread::sleep(INTERVAL);
    assert!(!table(n0).contains_key(&NodeId(0)), "an answer naming our own id entered: {:?}", table(n0));
    wait_stat(n0, "dropped_own_id", 1);
    let spoofed = stat(n0, "dropped_spoofed");
    send(&cand, a0, Packet { src: NodeId(1), ..P });
    wait_stat(n0, "dropped_spoofed", spoofed + 1);
    // A probe naming node 1 from the candidate address: not answered.
    send(&cand, a0, Packet { src: NodeId(1), dst: ANY, body: Body::Discover, ..P });
    assert!(next(&cand, INTERVAL * 2, |p| p.dst == NodeId(1)).is_none(), "a probe naming node 1 is not answered");
    wait_stat(n0, "dropped_spoofed", spoofed + 2);
    let foreign = stat(n0, "dropped_foreign");
    send(&cand, a0, Packet { body: Body::Close { qpn: 17 }, ..P });
    std::thread::sleep(INTERVAL);
    assert!(!table(n0).contains_key(&NodeId(7)), "a close from a candidate address entered node 7");
    wait_stat(n0, "dropped_foreign", foreign + 1);
    // ... probing: answered, nothing entered.
    send(&cand, a0, Packet { dst: ANY, body: Body::Discover, ..P });
    let ack = next(&cand, Duration::from_secs(5), |p| p.body == Body::DiscoverAck).expect("answered");
    assert_eq!((ack.src, ack.dst), (NodeId(0), NodeId(7)));
    std::thread::sleep(INTERVAL * 2);
    assert_eq!(table(n0), before, "nothing entered");
    assert_eq!(table(n0)[&NodeId(1)], a1);
    assert_eq!(stat(n0, "discovered_by_address"), 1);

    // Positive control: the candidate's answer enters it; another id from
    // the same address replaces it.
    send(&cand, a0, P);
    wait_until("node 7 entered", || table(n0).get(&NodeId(7)) == Some(&ca));
    send(&cand, a0, Packet { src: NodeId(8), ..P });
    wait_until("node 8 replaces node 7", || table(n0).get(&NodeId(8)) == Some(&ca));
    assert!(!table(n0).contains_key(&NodeId(7)));
    wait_until("Invalidated(7)", || n0.handler.events().contains(&NodeEvent::Invalidated(NodeId(7))));
}

/// Sends `total` probes with varying source ids from `s` to `to`, waiting
/// for each burst to be counted; returns (answered, seconds).
fn probe_flood(n: &Node<SimFabric>, s: &UdpSocket, total: u64) -> (u64, f64) {
    let to = addr(n);
    let handled = || stat(n, "discover_answered") + stat(n, "dropped_probe_rate");
    let (base, answered0) = (handled(), stat(n, "discover_answered"));
    let t0 = Instant::now();
    let mut b = Vec::new();
    for i in 0..total {
        let src = NodeId(2 + (i % 60_000) as u16);
        Packet { src, dst: ANY, instance: i as u32, body: Body::Discover }.encode(&mut b);
        s.send_to(&b, to).unwrap();
        if i % 64 == 63 {
            wait_until("probes counted", || handled() - base > i);
        }
    }
    wait_until("every probe counted", || handled() - base == total);
    (stat(n, "discover_answered") - answered0, t0.elapsed().as_secs_f64())
}

/// Probes from a stranger are answered at most at the stranger rate (10 at
/// once, 50/s), from a candidate address at the known rate (100 at once,
/// 1 000/s), and leave no state behind, however many come.
#[test]
fn a_flood_of_probes_is_answered_at_a_bounded_rate_and_creates_no_state() {
    let net = SimNetwork::new();
    let nodes = [start(config(0, &net, None, None)), start(config(1, &net, None, None))];
    introduce(&nodes);
    wait_discovered(&nodes);
    let n0 = &nodes[0];
    let (before, cands) = (table(n0), n0.engine.manager().addresses());
    let (answered, took) = probe_flood(n0, &socket(), 20_000);
    eprintln!("stranger: 20000 probes in {took:.2} s: {answered} answered");
    assert!(answered as f64 <= 10.0 + 50.0 * took + 1.0, "{answered} answers in {took} s");
    assert!(answered >= 10, "the burst is answered");
    assert_eq!(table(n0), before);
    assert_eq!(n0.engine.manager().addresses(), cands);

    let cand = socket();
    n0.engine.add_address(cand.local_addr().unwrap()).unwrap();
    let (answered, took) = probe_flood(n0, &cand, 20_000);
    eprintln!("candidate: 20000 probes in {took:.2} s: {answered} answered");
    assert!(answered as f64 <= 100.0 + 1000.0 * took + 1.0, "{answered} answers in {took} s");
    assert!(answered >= 100, "the burst is answered");
    assert_eq!(table(n0), before, "no node entered by probes from a candidate address");
    assert!(n0.engine.manager().addresses().contains(&(cand.local_addr().unwrap(), None)));
}

/// With a key: probes need the key and a known address; an answer from a
/// candidate address must pass the instance challenge, so neither a
/// recording nor a node without the key is entered; a key holder at a
/// candidate address that answers the challenge is.
#[test]
fn with_a_key_probes_need_the_key_and_answers_the_instance_challenge() {
    let net = SimNetwork::new();
    let n0 = start(config(0, &net, Some(KEY), None));
    let a0 = addr(&n0);
    let probe = Packet { dst: ANY, body: Body::Discover, ..P };

    let stranger = socket();
    stranger.send_to(&sealed(KEY, &probe, 1), a0).unwrap();
    assert!(next(&stranger, INTERVAL * 2, |_| true).is_none(), "a stranger's probe is not answered with a key");
    wait_stat(&n0, "dropped_probe_foreign", 1);

    let cand = socket();
    let ca = cand.local_addr().unwrap();
    n0.engine.add_address(ca).unwrap();
    next(&cand, Duration::from_secs(5), |p| p.body == Body::Discover).expect("probed");
    let unauth = stat(&n0, "dropped_unauthenticated");
    send(&cand, a0, probe);
    cand.send_to(&sealed(OTHER_KEY, &probe, 1), a0).unwrap();
    wait_stat(&n0, "dropped_unauthenticated", unauth + 2);
    cand.send_to(&sealed(KEY, &probe, 1), a0).unwrap();
    let ack = next(&cand, Duration::from_secs(5), |p| p.body == Body::DiscoverAck).expect("answered");
    assert_eq!((ack.src, ack.dst), (NodeId(0), NodeId(7)));
    // A probe takes part in no sequence window: the same one again is answered again.
    cand.send_to(&sealed(KEY, &probe, 1), a0).unwrap();
    next(&cand, Duration::from_secs(5), |p| p.body == Body::DiscoverAck).expect("answered again");

    // Answers without the key, with another key: refused.
    send(&cand, a0, P);
    cand.send_to(&sealed(OTHER_KEY, &P, 1), a0).unwrap();
    std::thread::sleep(INTERVAL);
    assert!(!table(&n0).contains_key(&NodeId(7)), "an answer without the key entered");
    wait_stat(&n0, "dropped_unauthenticated", unauth + 4);
    // A sealed answer of an instance not admitted: challenged at the address.
    let answer = sealed(KEY, &P, 1);
    cand.send_to(&answer, a0).unwrap();
    let ch = next(&cand, Duration::from_secs(5), |p| matches!(p.body, Body::Challenge { .. })).expect("challenged");
    let Body::Challenge { instance: 55, nonce } = ch.body else { panic!("{ch:?}") };
    cand.send_to(&answer, a0).unwrap();
    std::thread::sleep(INTERVAL * 2);
    assert!(!table(&n0).contains_key(&NodeId(7)), "not entered before the challenge is answered");

    // Positive control: a key holder answering the challenge is entered.
    cand.send_to(&sealed(KEY, &Packet { body: Body::Response { nonce }, ..P }, 2), a0).unwrap();
    next(&cand, Duration::from_secs(5), |p| p.body == Body::Discover).expect("probed again at once");
    cand.send_to(&sealed(KEY, &P, 3), a0).unwrap();
    wait_until("node 7 entered", || table(&n0).get(&NodeId(7)) == Some(&ca));
    // A recording of the answer replayed later changes nothing (window).
    let replayed = stat(&n0, "dropped_replayed");
    cand.send_to(&sealed(KEY, &P, 3), a0).unwrap();
    wait_stat(&n0, "dropped_replayed", replayed + 1);
}
