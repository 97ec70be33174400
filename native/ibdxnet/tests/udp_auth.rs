//! The authenticated control plane against a spoofing attacker: forged,
//! modified and replayed packets sent with the real peer's source address
//! (raw sockets, so root only: skipped with a notice otherwise) at a node
//! with a live connection carrying verified data; the same without a key,
//! where the documented hijack works; and a node with a key next to one
//! without.

mod common;

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use common::engine::{base_config, link, start_nodes, start_nodes_unlinked, wait_until, Node};
use common::rawudp::{is_root, Recorder, Spoofer};
use common::skip_notice;
use ibdxnet::con::proto::{Body, Packet, HEADER_LEN, MAC_LEN};
use ibdxnet::con::{AuthKey, AuthProblem, ConError, NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, Gid, QpEndpoint, SimOptions};
use ibdxnet::loopback::StreamOptions;
use ibdxnet::msgrc::EngineConfig;

fn key() -> AuthKey {
    AuthKey::new(b"udp-auth test key 0123456789", "test").unwrap()
}

fn stats_of(n: &Node<SimFabric>) -> HashMap<&'static str, u64> {
    n.engine.stats_map().into_iter().collect()
}

fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => panic!("IPv4 expected"),
    }
}

fn config(i: u16, net: &std::sync::Arc<SimNetwork>, key: Option<AuthKey>) -> EngineConfig {
    let mut c = base_config(i, FabricKind::Sim);
    c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
    c.auth_key = key;
    c
}

fn streaming(keyed: bool) -> Vec<Node<SimFabric>> {
    let nodes = streaming_unlinked(keyed);
    link(nodes.iter().map(|n| &n.engine));
    nodes
}

/// Two streaming nodes that do not know each other yet (`link`).
fn streaming_unlinked(keyed: bool) -> Vec<Node<SimFabric>> {
    let net = SimNetwork::new();
    let k = keyed.then(key);
    let opts = StreamOptions { verify: true, limit: None, ..Default::default() };
    start_nodes_unlinked(2, opts, |i| config(i, &net, k.clone()))
}

fn connect_and_stream(nodes: &[Node<SimFabric>]) -> Vec<std::sync::Arc<ibdxnet::con::Connection<SimFabric>>> {
    let mut held = Vec::new();
    for (i, j) in [(0usize, 1u16), (1, 0)] {
        let c = nodes[i].engine.connect(NodeId(j)).expect("connect");
        // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
        unsafe { nodes[i].handler.add_target(NodeId(j), c.ring().address(), c.ring().size()) };
        held.push(c);
    }
    wait_until("data flows", || nodes[0].handler.received.load(Relaxed) > (1 << 20));
    held
}

/// Waits until counter `key` of node 0 grew by `n` over `base`.
fn wait_counted(node: &Node<SimFabric>, base: &HashMap<&'static str, u64>, key: &str, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = stats_of(node)[key] - base[key];
        if now == n {
            return;
        }
        assert!(now < n, "{key}: {now} counted, {n} expected");
        assert!(Instant::now() < deadline, "{key}: only {now} of {n} counted: {:?}", stats_of(node));
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Both streams still flow, intact, with no failure reported.
fn still_intact(nodes: &[Node<SimFabric>]) {
    for n in nodes {
        let before = n.handler.received.load(Relaxed);
        wait_until("data still flows", || n.handler.received.load(Relaxed) > before + (4 << 20));
    }
    for n in nodes {
        n.handler.stop_sending();
    }
    for (i, n) in nodes.iter().enumerate() {
        assert!(
            !n.handler.events().iter().any(|e| matches!(e, NodeEvent::Disconnected(_) | NodeEvent::Closed(_))),
            "node {i}: {:?}",
            n.handler.events()
        );
        let s = &n.handler.incoming()[&(1 - i as u16)];
        assert_eq!(s.corrupt, 0, "node {i}: corrupt, lost or reordered bytes");
        assert_eq!(stats_of(n)["errors"], 0);
    }
}

/// An exchange claiming to be node 1's, for a queue pair on `sim_network`
/// (the nodes' own: the forger passes the fabric check).
fn forged_exchange(sim_network: u64, instance: u32, qpn: u32, peer_qpn: u32) -> Packet {
    let endpoint = QpEndpoint { qpn, psn: 0x1234, lid: 0, gid: Gid([0; 16]), mtu: 4096, sim_addr: 0xBAD, sim_network };
    Packet {
        src: NodeId(1),
        dst: NodeId(0),
        instance,
        body: Body::Exchange { endpoint, peer_qpn, established: true, flow_unit: 1 << 20 },
    }
}

fn net_of(n: &Node<SimFabric>) -> u64 {
    use ibdxnet::fabric::Fabric;
    n.engine.manager().queues().fabric.info().sim_network
}

fn skip_unless_root(test: &str) -> bool {
    if !is_root() {
        skip_notice(&format!("SKIPPED udp_auth::{test}: spoofing source addresses needs raw sockets (root)\n"));
    }
    !is_root()
}

#[test]
fn with_a_key_forged_modified_and_replayed_packets_are_dropped_and_the_connection_carries_on() {
    if skip_unless_root("with_a_key_forged_modified_and_replayed_packets_are_dropped") {
        return;
    }
    let nodes = streaming_unlinked(true);
    let (a0, a1) = (v4(nodes[0].engine.manager().local_addr()), v4(nodes[1].engine.manager().local_addr()));
    // Record node 1's packets to node 0 from the first discovery on: the
    // recorder is listening before either node knows the other (started
    // after `add_node`, a descheduled test thread missed the discovery and
    // the handshake in CI: 2 packets recorded).
    let rec = Recorder::start(a1.port(), a0.port());
    link(nodes.iter().map(|n| &n.engine));
    let held = connect_and_stream(&nodes);
    std::thread::sleep(Duration::from_millis(50));
    let recorded = rec.finish();
    assert!(recorded.len() >= 3, "recorded only {} packets", recorded.len());
    let conn = nodes[0].engine.manager().established(NodeId(1)).unwrap();
    let (qpn, peer_qpn, peer_instance) = (conn.local_qpn(), conn.peer_qpn(), conn.peer_instance());
    let spoof = Spoofer::new();
    let base = stats_of(&nodes[0]);

    // Forged without the key: the two-packet hijack, a close, a leave, a
    // done, and discovery, unsealed and with a made-up seal.
    let mut forged = Vec::new();
    for body in [
        forged_exchange(net_of(&nodes[0]), 0x5EED, 0x777, 0).body,
        forged_exchange(net_of(&nodes[0]), 0x5EED, 0x777, qpn).body,
        Body::Close { qpn: peer_qpn },
        Body::Leave { qpn: peer_qpn, handled: 0 },
        Body::Done { qpn: peer_qpn, peer_qpn: qpn },
        Body::Discover,
    ] {
        for instance in [0x5EED, peer_instance] {
            let mut b = Vec::new();
            Packet { src: NodeId(1), dst: NodeId(0), instance, body }.encode(&mut b);
            forged.push(b.clone());
            b[4] = ibdxnet::con::proto::VERSION_KEYED;
            b.extend_from_slice(&u64::MAX.to_be_bytes());
            b.extend_from_slice(&[0xA5; MAC_LEN]);
            forged.push(b);
        }
    }
    // Modified genuine packets: another instance id, sequence number, MAC
    // byte, or payload byte (each keeps the packet well-formed).
    for p in &recorded {
        for at in [12, p.len() - MAC_LEN - 1, p.len() - 1, HEADER_LEN.min(p.len() - MAC_LEN - 9)] {
            let mut m = p.clone();
            m[at] ^= 0x01;
            if Packet::decode_any(&m).is_ok() {
                forged.push(m);
            }
        }
    }
    for f in &forged {
        spoof.send(a1, a0, f);
    }
    wait_counted(&nodes[0], &base, "dropped_unauthenticated", forged.len() as u64);
    // Replays of everything node 1 sent: discovery, challenges, responses, exchanges.
    for _ in 0..3 {
        for p in &recorded {
            spoof.send(a1, a0, p);
        }
    }
    wait_counted(&nodes[0], &base, "dropped_replayed", 3 * recorded.len() as u64);
    let after = stats_of(&nodes[0]);
    for k in ["dropped_malformed", "dropped_foreign", "dropped_spoofed", "dropped_stale", "dropped_unverified"] {
        assert_eq!(after[k], base[k], "{k}");
    }
    eprintln!(
        "udp_auth: {} forged/modified dropped as unauthenticated, {} replays dropped as replayed",
        forged.len(),
        3 * recorded.len()
    );
    let now = nodes[0].engine.manager().established(NodeId(1)).expect("still established");
    assert_eq!((now.local_qpn(), now.peer_qpn(), now.peer_instance()), (qpn, peer_qpn, peer_instance));
    still_intact(&nodes);
    drop(nodes);
    drop(held);
}

#[test]
fn with_a_key_packets_of_a_previous_instance_are_refused() {
    if skip_unless_root("with_a_key_packets_of_a_previous_instance_are_refused") {
        return;
    }
    let net = SimNetwork::new();
    let opts = StreamOptions { verify: true, limit: None, ..Default::default() };
    let mut nodes: Vec<Node<SimFabric>> = start_nodes(2, opts.clone(), |i| config(i, &net, Some(key())));
    let (a0, a1) = (v4(nodes[0].engine.manager().local_addr()), v4(nodes[1].engine.manager().local_addr()));
    let rec = Recorder::start(a1.port(), a0.port());
    nodes[1].engine.connect(NodeId(0)).expect("connect");
    std::thread::sleep(Duration::from_millis(50));
    let old = rec.finish();
    // Node 1 restarts on the same address (a new instance).
    let n1 = nodes.pop().unwrap();
    n1.engine.shutdown();
    let mut c = config(1, &net, Some(key()));
    c.listen = SocketAddr::V4(a1);
    let restarted: Node<SimFabric> = start_nodes(1, opts, |_| c.clone()).pop().unwrap();
    restarted.engine.add_node(NodeId(0), SocketAddr::V4(a0)).unwrap();
    // Node 0 hears node 1 leave (its `Leave` at shutdown, `Left`) or, if
    // that packet is lost, learns the restart through node 1's new instance
    // (`Disconnected`).
    wait_until("node 0 sees the restart", || {
        nodes[0].handler.events().iter().any(|e| matches!(e, NodeEvent::Disconnected(_) | NodeEvent::Left { .. }))
    });
    let c1 = restarted.engine.connect(NodeId(0)).expect("connect after restart");
    wait_until("node 0 established", || nodes[0].engine.manager().established(NodeId(1)).is_some());
    let c0 = nodes[0].engine.manager().established(NodeId(1)).expect("node 0 side");
    assert_eq!(c0.peer_qpn(), c1.local_qpn());
    let spoof = Spoofer::new();
    let base = stats_of(&nodes[0]);
    for p in &old {
        spoof.send(a1, a0, p);
    }
    wait_counted(&nodes[0], &base, "dropped_replayed", old.len() as u64);
    let now = nodes[0].engine.manager().established(NodeId(1)).expect("still established");
    assert_eq!(
        (now.local_qpn(), now.peer_qpn(), now.peer_instance()),
        (c0.local_qpn(), c0.peer_qpn(), c0.peer_instance())
    );
    assert_eq!(stats_of(&nodes[0])["dropped_unverified"], base["dropped_unverified"]);
    restarted.engine.shutdown();
}

/// Without a key the node trusts its table address: an attacker who can
/// send from the peer's address tears down the live connection with one
/// packet and, reading (or guessing) the new queue pair number in the
/// node's answer, makes the node establish a connection to the attacker's
/// queue pair with a second (what SECURITY.md states for unkeyed operation).
#[test]
fn without_a_key_two_spoofed_exchanges_hijack_the_connection() {
    if skip_unless_root("without_a_key_two_spoofed_exchanges_hijack_the_connection") {
        return;
    }
    let nodes = streaming(false);
    let (a0, a1) = (v4(nodes[0].engine.manager().local_addr()), v4(nodes[1].engine.manager().local_addr()));
    // An idle connection: a peer busy sending notices its failed sends and
    // reconnects, racing the forger (who may win or lose that race).
    let before = nodes[0].engine.connect(NodeId(1)).expect("connect");
    // Both sides established and nothing of the set-up still in flight.
    wait_until("node 1 established", || nodes[1].engine.manager().established(NodeId(0)).is_some());
    std::thread::sleep(Duration::from_millis(200));
    let spoof = Spoofer::new();
    // Node 0's answer (to the real node 1) names its new queue pair: an
    // attacker on the path reads it there; a blind one has to guess it.
    let rec = Recorder::start(a0.port(), a1.port());
    let mut b = Vec::new();
    forged_exchange(net_of(&nodes[0]), 0x5EED, 0x777, 0).encode(&mut b);
    spoof.send(a1, a0, &b);
    wait_until("the live connection is torn down", || {
        nodes[0].handler.events().iter().any(|e| matches!(e, NodeEvent::Disconnected(NodeId(1))))
    });
    let answer = |recorded: Vec<Vec<u8>>| {
        recorded
            .iter()
            .filter_map(|d| match Packet::decode(d) {
                Ok(Packet { body: Body::Exchange { endpoint, peer_qpn: 0x777, .. }, .. }) => Some(endpoint.qpn),
                _ => None,
            })
            .next_back()
    };
    // Waited for, not a fixed pause: in the emulated VM the answer reached
    // the recorder more than 20 ms after the disconnect event.
    wait_until("node 0 answers the forged exchange", || answer(rec.snapshot()).is_some());
    let new_qpn = answer(rec.finish()).expect("node 0 answered the forged exchange");
    assert_ne!(new_qpn, before.local_qpn());
    forged_exchange(net_of(&nodes[0]), 0x5EED, 0x777, new_qpn).encode(&mut b);
    spoof.send(a1, a0, &b);
    wait_until("the forger's connection is established", || {
        nodes[0].engine.manager().established(NodeId(1)).is_some_and(|c| c.peer_instance() == 0x5EED)
    });
    let hijacked = nodes[0].engine.manager().established(NodeId(1)).unwrap();
    assert_eq!((hijacked.local_qpn(), hijacked.peer_qpn()), (new_qpn, 0x777));
}

#[test]
fn a_node_with_a_key_and_one_without_refuse_each_other_naming_the_reason() {
    let net = SimNetwork::new();
    let nodes: Vec<Node<SimFabric>> = start_nodes(2, StreamOptions::default(), |i| {
        let mut c = config(i, &net, (i == 0).then(key));
        c.discovery_interval = Duration::from_millis(50);
        c
    });
    // The node without a key fails as soon as it has seen a sealed packet.
    let t0 = Instant::now();
    let err = nodes[1].engine.connect_timeout(NodeId(0), Duration::from_secs(5)).expect_err("connected");
    assert_eq!(err, ConError::Auth { node: NodeId(0), problem: AuthProblem::PeerRequiresAuth });
    assert!(t0.elapsed() < Duration::from_secs(4), "took {:?}", t0.elapsed());
    assert!(err.to_string().contains("node 0x0000 requires authentication"), "{err}");
    // The node with a key reports it at its deadline (a forged unsealed
    // packet must not fail its connects early).
    let err = nodes[0].engine.connect_timeout(NodeId(1), Duration::from_millis(400)).expect_err("connected");
    assert_eq!(err, ConError::Auth { node: NodeId(1), problem: AuthProblem::PeerHasNoAuth });
    assert!(err.to_string().contains("node 0x0001 does not use authentication"), "{err}");
    for n in &nodes {
        assert!(stats_of(n)["dropped_unauthenticated"] > 0, "{:?}", stats_of(n));
        assert!(n.engine.manager().established(NodeId(1 - n.engine.node_id().0)).is_none());
    }
}

/// Cost of authentication (`./ibdxnet bench auth`): packets per second the
/// job thread handles (sealed or plain `Discover`s from a pretend node,
/// each answered) and connect() latency of fresh connections, with and
/// without a key, in one run.
#[test]
#[ignore]
fn auth_cost() {
    use ibdxnet::con::auth::Auth;
    const PACKETS: u64 = 200_000;
    const CONNECTS: usize = 300;
    for keyed in [false, true] {
        let net = SimNetwork::new();
        let k = keyed.then(key);
        let nodes: Vec<Node<SimFabric>> = start_nodes(2, StreamOptions::default(), |i| config(i, &net, k.clone()));
        // Packet rate.
        let fake = NodeId(0x7A7A);
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        nodes[0].engine.add_node(fake, sock.local_addr().unwrap()).unwrap();
        let target = nodes[0].engine.manager().local_addr();
        let tx = Auth::new(k.clone());
        let instance = 0x1234_5679;
        let mut buf = Vec::new();
        let discover = Packet { src: fake, dst: NodeId(0), instance, body: Body::Discover };
        if keyed {
            // Answer the challenge of the first packet: admitted from then on.
            tx.encode(&discover, &mut buf);
            sock.send_to(&buf, target).unwrap();
            let mut rx = [0u8; 512];
            let n = sock.recv(&mut rx).expect("challenge");
            let (p, _) = Packet::decode_any(&rx[..n]).expect("decodes");
            let Body::Challenge { nonce, .. } = p.body else { panic!("{p:?}") };
            tx.encode(&Packet { body: Body::Response { nonce }, ..discover }, &mut buf);
            sock.send_to(&buf, target).unwrap();
            wait_until("admitted", || stats_of(&nodes[0])["auth_instances_admitted"] == 1);
        }
        sock.set_nonblocking(true).unwrap();
        let base = stats_of(&nodes[0])["packets_in"];
        let t0 = Instant::now();
        let mut sent = 0;
        let mut rx = [0u8; 512];
        while sent < PACKETS {
            for _ in 0..64 {
                tx.encode(&discover, &mut buf);
                sock.send_to(&buf, target).unwrap();
                sent += 1;
            }
            while stats_of(&nodes[0])["packets_in"] - base < sent {
                while sock.recv(&mut rx).is_ok() {}
                std::thread::yield_now();
            }
        }
        let rate = sent as f64 / t0.elapsed().as_secs_f64();
        // Connection set-up: connect, then close (both sides) and again.
        let mut lat = Vec::with_capacity(CONNECTS);
        for _ in 0..CONNECTS {
            let t = Instant::now();
            let c = nodes[0].engine.connect(NodeId(1)).expect("connect");
            lat.push(t.elapsed());
            drop(c);
            nodes[0].engine.manager().close(NodeId(1), true);
            wait_until("closed on both sides", || nodes.iter().all(|n| n.engine.manager().connection_count() == 0));
        }
        let first = lat[0];
        lat.sort();
        let pct = |p: usize| lat[(lat.len() * p / 100).min(lat.len() - 1)];
        println!(
            "auth cost (key: {keyed}): control packets handled {rate:.0}/s ({PACKETS} Discover, each answered); \
             connect() of {CONNECTS} fresh connections: first {first:.2?}, median {:.2?}, p99 {:.2?}, max {:.2?}",
            pct(50),
            pct(99),
            lat[lat.len() - 1]
        );
    }
}
