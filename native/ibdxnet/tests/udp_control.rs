//! The control plane against a holder of the pre-shared key and against
//! table entries with an unspecified address.
//!
//! The key is one group secret: whoever holds it (and can send from a
//! node's address: raw sockets, so root, skipped with a notice otherwise)
//! seals packets like any member. Such a key holder must not be able to lock
//! a real node out of the control plane: one packet with a far-future
//! sequence number is refused (`dropped_ahead`) and moves nothing, and a
//! window pushed ahead step by step is reset by the real node answering a
//! challenge (`auth_resyncs`), which a recorded or forged answer cannot do.
//!
//! A node-table entry `0.0.0.0:port` names no peer (as on NIO): packets
//! claiming that node are refused from every address, none are sent to it.
//!
//! The tests read counters with `get` (0 if absent) and check behaviour
//! first, so that they also build against the code before these rules,
//! where they fail (the negative controls in the commit messages).

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use common::engine::{start_nodes, wait_until, Node};
use common::rawudp::{Recorder, Spoofer};
use common::records::Rng;
use ibdxnet::con::proto::{Body, Packet, NONCE_LEN};
use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::loopback::StreamOptions;

use common::control::*;

/// Node 1's (real) sequence numbers to node 0 are small: 2^40 is far ahead.
#[test]
fn a_key_holders_far_future_sequence_number_does_not_lock_the_node_out() {
    if skip_unless_root("a_key_holders_far_future_sequence_number_does_not_lock_the_node_out") {
        return;
    }
    let (nodes, _net) = keyed_pair(StreamOptions::default());
    let (a0, a1) = addrs(&nodes);
    let instance = nodes[0].engine.manager().established(NodeId(1)).unwrap().peer_instance();
    let base = stats_of(&nodes[0]);
    // One sealed, harmless packet "from node 1", far ahead.
    let p = Packet { src: NodeId(1), dst: NodeId(0), instance, body: Body::DiscoverAck };
    Spoofer::new().send(a1, a0, &sealed(&p, 1 << 40));
    wait_until("node 0 handled it", || {
        stat(&nodes[0], "packets_in") > base["packets_in"] || stat(&nodes[0], "dropped_ahead") > 0
    });
    let accepted = stat(&nodes[0], "packets_in") - base["packets_in"];
    // Node 1's own packets still count: node 0 hears its close at once.
    let took = node_0_hears_node_1_close(&nodes, Duration::from_secs(5));
    let after = stats_of(&nodes[0]);
    eprintln!(
        "udp_control: after one packet 2^40 ahead, node 0 heard node 1's close after {took:?}; \
         dropped_ahead {}, dropped_replayed +{}",
        after.get("dropped_ahead").copied().unwrap_or(0),
        after["dropped_replayed"] - base["dropped_replayed"]
    );
    assert!(took.is_some(), "node 1 is locked out of node 0's control plane: {after:?}");
    assert_eq!(after.get("dropped_ahead"), Some(&1), "refused and counted as too far ahead");
    assert_eq!(accepted, 0, "the packet far ahead was accepted");
    // And it connects again.
    nodes[1].engine.connect_timeout(NodeId(0), Duration::from_secs(2)).expect("reconnect");
}

/// A key holder who pushes the window ahead within the bound, step by step,
/// locks the node out only until its next packet: node 0 challenges, node 1
/// answers, the window is reset. Node 1's recorded answer and a key holder's
/// answer with a made-up nonce reset nothing.
#[test]
fn a_window_pushed_step_by_step_is_reset_by_the_real_node_answering_a_challenge() {
    if skip_unless_root("a_window_pushed_step_by_step_is_reset_by_the_real_node_answering_a_challenge") {
        return;
    }
    // Closes are retransmitted only every 2 s: node 1 is heard within the
    // second below only through the challenge round trip (its `Done` after
    // the answer, or its close repeated once it answered).
    let (nodes, _net) = keyed_pair_retrying(StreamOptions::default(), Duration::from_secs(2));
    let (a0, a1) = addrs(&nodes);
    let instance = nodes[0].engine.manager().established(NodeId(1)).unwrap().peer_instance();
    let spoof = Spoofer::new();
    let base = stats_of(&nodes[0]);
    let p = Packet { src: NodeId(1), dst: NodeId(0), instance, body: Body::DiscoverAck };
    const STEPS: u64 = 64;
    for k in 1..=STEPS {
        spoof.send(a1, a0, &sealed(&p, k * STEP));
    }
    wait_until("node 0 took the steps", || stat(&nodes[0], "packets_in") - base["packets_in"] == STEPS);
    let rec = Recorder::start(a1.port(), a0.port());
    let took = node_0_hears_node_1_close(&nodes, Duration::from_secs(5));
    let after = stats_of(&nodes[0]);
    eprintln!(
        "udp_control: window pushed {STEPS}x{STEP} ahead: node 0 heard node 1's close after {took:?} \
         (dropped_replayed +{}, challenges +{}, resyncs {})",
        after["dropped_replayed"] - base["dropped_replayed"],
        after["auth_challenges"] - base["auth_challenges"],
        after.get("auth_resyncs").copied().unwrap_or(0)
    );
    let took = took.unwrap_or_else(|| panic!("node 1 is locked out of node 0's control plane: {after:?}"));
    // Bounded: one refused packet, a challenge round trip, the close again.
    assert!(took < Duration::from_secs(1), "re-admitted only after {took:?}");
    assert_eq!(after.get("auth_resyncs"), Some(&1));
    std::thread::sleep(Duration::from_millis(100));
    let answers: Vec<Vec<u8>> = rec
        .finish()
        .into_iter()
        .filter(|d| matches!(Packet::decode_any(d), Ok((Packet { body: Body::Response { .. }, .. }, _))))
        .collect();
    assert_eq!(answers.len(), 1, "node 1 answered once");
    // Its answer replayed, and answers a key holder makes without the nonce.
    let base = stats_of(&nodes[0]);
    for _ in 0..3 {
        spoof.send(a1, a0, &answers[0]);
    }
    let mut rng = Rng(0x0DDB_A11D_EC0D_E5EE);
    for seq in [1, 1 << 20, (STEPS + 1) * STEP, u64::MAX] {
        let mut nonce = [0u8; NONCE_LEN];
        nonce.iter_mut().for_each(|b| *b = rng.next() as u8);
        spoof.send(a1, a0, &sealed(&Packet { body: Body::Response { nonce }, ..p }, seq));
    }
    wait_until("all counted", || {
        let s = stats_of(&nodes[0]);
        s["dropped_replayed"] + s["dropped_ahead"] - base["dropped_replayed"] - base["dropped_ahead"] == 7
    });
    assert_eq!(stats_of(&nodes[0])["auth_resyncs"], 1, "no answer but node 1's reset the window");
    // Node 1 is still heard: it connects again.
    nodes[1].engine.connect_timeout(NodeId(0), Duration::from_secs(2)).expect("reconnect");
}

/// A node that restarts (a new instance, sequence numbers from 1 again)
/// after a key holder pushed its old instance's window is admitted again
/// by the challenge of new instances, within a bounded time.
#[test]
fn a_restarted_node_is_re_admitted_within_a_bounded_time() {
    if skip_unless_root("a_restarted_node_is_re_admitted_within_a_bounded_time") {
        return;
    }
    let (mut nodes, net) = keyed_pair(StreamOptions::default());
    let (a0, a1) = addrs(&nodes);
    let instance = nodes[0].engine.manager().established(NodeId(1)).unwrap().peer_instance();
    let spoof = Spoofer::new();
    let p = Packet { src: NodeId(1), dst: NodeId(0), instance, body: Body::DiscoverAck };
    for k in 1..=64 {
        spoof.send(a1, a0, &sealed(&p, k * STEP));
    }
    let n1 = nodes.pop().unwrap();
    n1.engine.shutdown();
    let admitted = stat(&nodes[0], "auth_instances_admitted");
    let t0 = Instant::now();
    let mut c = config(1, &net, true);
    c.listen = SocketAddr::V4(a1);
    let restarted: Node<SimFabric> = start_nodes(1, StreamOptions::default(), |_| c.clone()).pop().unwrap();
    restarted.engine.add_node(NodeId(0), SocketAddr::V4(a0)).unwrap();
    restarted.engine.connect_timeout(NodeId(0), Duration::from_secs(5)).expect("connect after the restart");
    let took = t0.elapsed();
    wait_until("node 0 established with the new instance", || {
        nodes[0].engine.manager().established(NodeId(1)).is_some_and(|c| c.peer_instance() != instance)
    });
    eprintln!("udp_control: restarted node 1 connected to node 0 {took:?} after its engine started again");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(stat(&nodes[0], "auth_instances_admitted"), admitted + 1);
    restarted.engine.shutdown();
}

/// The fuzzer in the style of `udp_fuzz`, as a key holder: sealed packets
/// "from node 1" with sequence numbers far ahead or used up, while both
/// nodes stream. Each is counted once (too far ahead or replayed), the
/// challenges they cause are rate limited, the connection and its data are
/// untouched, and node 1's own close is still heard.
#[test]
fn a_key_holders_flood_of_refused_sequence_numbers_is_counted_and_harmless() {
    if skip_unless_root("a_key_holders_flood_of_refused_sequence_numbers_is_counted_and_harmless") {
        return;
    }
    let net = SimNetwork::new();
    let nodes: Vec<Node<SimFabric>> =
        start_nodes(2, StreamOptions { verify: true, limit: None, ..Default::default() }, |i| config(i, &net, true));
    let mut held = Vec::new();
    for (i, j) in [(0usize, 1u16), (1, 0)] {
        let c = nodes[i].engine.connect(NodeId(j)).expect("connect");
        // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
        unsafe { nodes[i].handler.add_target(NodeId(j), c.ring().address(), c.ring().size()) };
        held.push(c);
    }
    wait_until("data flows", || nodes[0].handler.received.load(Relaxed) > (1 << 20));
    let (a0, a1) = addrs(&nodes);
    let conn = nodes[0].engine.manager().established(NodeId(1)).unwrap();
    let (qpn, peer_qpn, instance) = (conn.local_qpn(), conn.peer_qpn(), conn.peer_instance());
    let spoof = Spoofer::new();
    let base = stats_of(&nodes[0]);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let n: u64 = std::env::var("IBDXNET_FUZZ_DATAGRAMS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let t0 = Instant::now();
    let mut sent = 0;
    while sent < n {
        for _ in 0..64 {
            let body = match rng.below(5) {
                0 => Body::Discover,
                1 => Body::DiscoverAck,
                2 => Body::Close { qpn: peer_qpn },
                3 => Body::Leave { qpn: peer_qpn, handled: 0 },
                _ => Body::Response { nonce: [rng.next() as u8; NONCE_LEN] },
            };
            // Used up (0, or behind the window) or far ahead.
            let seq = if sent % 2 == 0 { rng.below(2) } else { (1 << 32) + rng.next() % (1 << 60) };
            spoof.send(a1, a0, &sealed(&Packet { src: NodeId(1), dst: NodeId(0), instance, body }, seq));
            sent += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = stats_of(&nodes[0]);
            let counted = s["dropped_replayed"] + s.get("dropped_ahead").copied().unwrap_or(0)
                - base["dropped_replayed"]
                - base.get("dropped_ahead").copied().unwrap_or(0);
            if counted == sent {
                break;
            }
            assert!(counted < sent, "{counted} counted of {sent}: {s:?}");
            assert!(Instant::now() < deadline, "only {counted} of {sent} counted: {s:?}");
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    let took = t0.elapsed();
    let after = stats_of(&nodes[0]);
    let d = |k: &str| after.get(k).copied().unwrap_or(0) - base.get(k).copied().unwrap_or(0);
    eprintln!(
        "udp_control: key holder flood of {sent} sealed datagrams in {took:.2?} ({:.0}/s): ahead {}, replayed {}, \
         challenges {}, resyncs {}",
        sent as f64 / took.as_secs_f64(),
        d("dropped_ahead"),
        d("dropped_replayed"),
        d("auth_challenges"),
        d("auth_resyncs")
    );
    assert!(d("dropped_ahead") >= sent / 2 && d("dropped_replayed") >= sent / 4, "{after:?}");
    assert_eq!(d("packets_in"), 0, "nothing of the flood was accepted");
    // At most one challenge per 20 ms gap (plus the first).
    let allowed = took.as_millis() as u64 / 20 + 2;
    assert!(d("auth_challenges") <= allowed, "{} challenges in {took:?}", d("auth_challenges"));
    let now = nodes[0].engine.manager().established(NodeId(1)).expect("still established");
    assert_eq!((now.local_qpn(), now.peer_qpn(), now.peer_instance()), (qpn, peer_qpn, instance));
    for nd in &nodes {
        let before = nd.handler.received.load(Relaxed);
        wait_until("data still flows", || nd.handler.received.load(Relaxed) > before + (4 << 20));
    }
    for nd in &nodes {
        nd.handler.stop_sending();
    }
    for (i, nd) in nodes.iter().enumerate() {
        assert!(
            !nd.handler.events().iter().any(|e| matches!(e, NodeEvent::Disconnected(_) | NodeEvent::Closed(_))),
            "node {i}: {:?}",
            nd.handler.events()
        );
        assert_eq!(nd.handler.incoming()[&(1 - i as u16)].corrupt, 0, "node {i}: corrupt bytes");
    }
    assert!(node_0_hears_node_1_close(&nodes, Duration::from_secs(5)).is_some(), "node 1 locked out");
    drop(held);
}

/// A key holder who can send from node 1's address tells node 0 that node
/// 1 is on another fabric (a sealed `WrongFabric`, fresh sequence number):
/// node 0's connects to node 1 fail at once, but only for ten discovery
/// intervals (500 ms here), not until node 1 restarts.
#[test]
fn a_key_holders_forged_wrong_fabric_makes_connects_fail_only_for_a_while() {
    if skip_unless_root("a_key_holders_forged_wrong_fabric_makes_connects_fail_only_for_a_while") {
        return;
    }
    let net = SimNetwork::new();
    let nodes: Vec<Node<SimFabric>> = start_nodes(2, StreamOptions::default(), |i| config(i, &net, true));
    let (a0, a1) = addrs(&nodes);
    wait_until("node 0 admitted node 1", || stat(&nodes[0], "auth_instances_admitted") >= 1);
    let instance = nodes[1].engine.manager().instance();
    let forged = Packet { src: NodeId(1), dst: NodeId(0), instance, body: Body::WrongFabric { sim_network: 0xBAD } };
    Spoofer::new().send(a1, a0, &sealed(&forged, 500));
    wait_until("node 0 believes it", || stat(&nodes[0], "foreign_fabric") >= 1);
    let t0 = Instant::now();
    let err = nodes[0].engine.connect_timeout(NodeId(1), Duration::from_secs(2)).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("not in this process's sim fabric"), "{err}");
    let connected = loop {
        if nodes[0].engine.connect_timeout(NodeId(1), Duration::from_millis(200)).is_ok() {
            break Some(t0.elapsed());
        }
        if t0.elapsed() > Duration::from_secs(5) {
            break None;
        }
    };
    eprintln!("udp_control: after a forged WrongFabric node 0 connected to node 1 after {connected:?}");
    let took = connected.expect("node 0 still refuses to connect to node 1");
    assert!(took >= Duration::from_millis(400), "the refusal was not believed at all: {took:?}");
}

/// Node 0's table gives node 1 as `0.0.0.0:<node 1's port>`. Before, any
/// process that could send from that port on any address spoke for node 1
/// (and node 1's real packets were accepted, so a live connection existed
/// for it to tear down), and node 0 sent its packets to the wildcard. Now
/// the entry names no peer: node 1 (from its real address) and an
/// unprivileged process on 127.0.0.2 are both refused as spoofed, nothing
/// is sent to it, and a connect to node 1 fails at once saying why.
#[test]
fn an_unspecified_table_address_matches_no_source_and_is_never_sent_to() {
    let net = SimNetwork::new();
    let nodes: Vec<Node<SimFabric>> = start_nodes(2, StreamOptions::default(), |i| config(i, &net, false));
    let (a0, a1) = addrs(&nodes);
    let m0 = nodes[0].engine.manager();
    assert!(m0.remove_node(NodeId(1)));
    wait_until("node 1 removed", || nodes[0].handler.events().contains(&NodeEvent::Invalidated(NodeId(1))));
    let wildcard: SocketAddr = format!("0.0.0.0:{}", a1.port()).parse().unwrap();
    m0.add_node(NodeId(1), wildcard).unwrap();
    // Let everything in flight settle, then count from here.
    std::thread::sleep(Duration::from_millis(100));
    let (base0, base1) = (stats_of(&nodes[0]), stats_of(&nodes[1]));
    let events0 = nodes[0].handler.events().len();

    // Node 1's real packets (discovery every 50 ms, its exchanges): refused.
    let err = nodes[1].engine.connect_timeout(NodeId(0), Duration::from_millis(500));
    assert!(err.is_err(), "node 0 accepted node 1 through its wildcard entry");
    // A local unprivileged process on another loopback address, same port.
    let intruder = UdpSocket::bind(SocketAddr::new("127.0.0.2".parse().unwrap(), a1.port())).expect("bind 127.0.0.2");
    let mut b = Vec::new();
    for (i, body) in
        [Body::Discover, Body::Close { qpn: 0x11 }, Body::Leave { qpn: 0x11, handled: 0 }].into_iter().enumerate()
    {
        Packet { src: NodeId(1), dst: NodeId(0), instance: 0x5EED + i as u32, body }.encode(&mut b);
        intruder.send_to(&b, a0).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let (after0, after1) = (stats_of(&nodes[0]), stats_of(&nodes[1]));
    let spoofed = after0["dropped_spoofed"] - base0["dropped_spoofed"];
    eprintln!(
        "udp_control: wildcard entry: node 0 dropped {spoofed} packets claiming node 1 as spoofed, accepted {}; \
         node 1 received {} from node 0",
        after0["packets_in"] - base0["packets_in"],
        after1["packets_in"] - base1["packets_in"]
    );
    assert_eq!(after0["packets_in"], base0["packets_in"], "a packet claiming node 1 was accepted");
    assert!(spoofed > 3, "node 1's and the intruder's packets counted as spoofed: {spoofed}");
    assert_eq!(after1["packets_in"], base1["packets_in"], "node 0 sent to the wildcard address");
    assert!(
        !nodes[0].handler.events()[events0..].iter().any(|e| matches!(e, NodeEvent::Discovered(NodeId(1)))),
        "{:?}",
        nodes[0].handler.events()
    );
    let t0 = Instant::now();
    let err = nodes[0].engine.connect_timeout(NodeId(1), Duration::from_secs(2)).expect_err("connected");
    assert!(t0.elapsed() < Duration::from_millis(100), "took {:?}", t0.elapsed());
    assert!(err.to_string().contains("0.0.0.0") && err.to_string().contains("unspecified"), "{err}");
    assert_eq!(nodes[0].engine.manager().connection_count(), 0);
}

/// What an unspecified address is for: a node's own entry and `listen`.
/// Node 0 binds `0.0.0.0:<port>` (its own entry names that address too and
/// is skipped), node 1 knows it as `127.0.0.1:<port>`: both connect and
/// exchange data.
#[test]
fn an_unspecified_listen_address_and_own_entry_still_work() {
    let net = SimNetwork::new();
    let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let any: SocketAddr = format!("0.0.0.0:{port}").parse().unwrap();
    let nodes: Vec<Node<SimFabric>> = start_nodes(2, StreamOptions::default(), |i| {
        let mut c = config(i, &net, false);
        if i == 0 {
            c.listen = any;
            c.nodes = vec![(NodeId(0), any)];
        }
        c
    });
    assert_eq!(nodes[0].engine.manager().local_addr(), any);
    // start_nodes gave node 1 node 0's bound address, the wildcard: use the real one.
    let m1 = nodes[1].engine.manager();
    assert!(m1.remove_node(NodeId(0)));
    wait_until("removed", || nodes[1].handler.events().contains(&NodeEvent::Invalidated(NodeId(0))));
    m1.add_node(NodeId(0), format!("127.0.0.1:{port}").parse().unwrap()).unwrap();
    nodes[1].engine.connect_timeout(NodeId(0), Duration::from_secs(5)).expect("node 1 to node 0");
    nodes[0].engine.connect_timeout(NodeId(1), Duration::from_secs(5)).expect("node 0 to node 1");
    assert_eq!(stat(&nodes[0], "dropped_spoofed"), 0);
}

/// Re-admission times (`cargo test --release --test udp_control -- --ignored
/// --nocapture readmission_times`): `IBDXNET_TRIALS` (default 50) times a
/// window pushed 64 x 1024 ahead, then node 1 closes and reconnects; 10
/// times node 1 restarts after such a push. Prints the distributions.
#[test]
#[ignore]
fn readmission_times() {
    if skip_unless_root("readmission_times") {
        return;
    }
    let trials: usize = std::env::var("IBDXNET_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let pct = |v: &mut Vec<Duration>| {
        v.sort();
        let at = |p: usize| v[(v.len() * p / 100).min(v.len() - 1)];
        format!("min {:.2?}, median {:.2?}, p90 {:.2?}, max {:.2?}", v[0], at(50), at(90), v[v.len() - 1])
    };
    let (mut nodes, net) = keyed_pair(StreamOptions::default());
    let (a0, a1) = addrs(&nodes);
    let spoof = Spoofer::new();
    let (mut heard, mut reconnect) = (Vec::new(), Vec::new());
    for _ in 0..trials {
        let instance = nodes[0].engine.manager().established(NodeId(1)).unwrap().peer_instance();
        let p = Packet { src: NodeId(1), dst: NodeId(0), instance, body: Body::DiscoverAck };
        // Trials further apart than the 20 ms gap between challenges to a node.
        std::thread::sleep(Duration::from_millis(30));
        let before = stat(&nodes[0], "packets_in");
        // The last trial's reset brought the window back to node 1's own number.
        for k in 1..=64 {
            spoof.send(a1, a0, &sealed(&p, k * STEP));
        }
        wait_until("steps taken", || stat(&nodes[0], "packets_in") >= before + 64);
        let closed = nodes[0].handler.events().iter().filter(|e| matches!(e, NodeEvent::Closed(_))).count();
        let t0 = Instant::now();
        assert!(nodes[1].engine.manager().close(NodeId(0), false));
        wait_until("node 0 hears the close", || {
            nodes[0].handler.events().iter().filter(|e| matches!(e, NodeEvent::Closed(_))).count() > closed
        });
        heard.push(t0.elapsed());
        wait_until("closed on both sides", || nodes.iter().all(|n| n.engine.manager().connection_count() == 0));
        let t1 = Instant::now();
        nodes[1].engine.connect_timeout(NodeId(0), Duration::from_secs(5)).expect("reconnect");
        wait_until("node 0 established", || nodes[0].engine.manager().established(NodeId(1)).is_some());
        reconnect.push(t1.elapsed());
    }
    let s = stats_of(&nodes[0]);
    println!(
        "re-admission after a window pushed 64x1024 ahead, {trials} trials: close heard {}; reconnect {}; \
         auth_resyncs {}, auth_challenges {}",
        pct(&mut heard),
        pct(&mut reconnect),
        s["auth_resyncs"],
        s["auth_challenges"]
    );
    let mut restart = Vec::new();
    for _ in 0..10 {
        let instance = nodes[0].engine.manager().established(NodeId(1)).map(|c| c.peer_instance()).unwrap_or(0);
        let p = Packet { src: NodeId(1), dst: NodeId(0), instance, body: Body::DiscoverAck };
        for k in 1..=64 {
            spoof.send(a1, a0, &sealed(&p, k * STEP));
        }
        nodes.pop().unwrap().engine.shutdown();
        let t0 = Instant::now();
        let mut c = config(1, &net, true);
        c.listen = SocketAddr::V4(a1);
        let n1: Node<SimFabric> = start_nodes(1, StreamOptions::default(), |_| c.clone()).pop().unwrap();
        n1.engine.add_node(NodeId(0), SocketAddr::V4(a0)).unwrap();
        n1.engine.connect_timeout(NodeId(0), Duration::from_secs(5)).expect("connect after the restart");
        restart.push(t0.elapsed());
        nodes.push(n1);
        wait_until("node 0 established with the new instance", || {
            nodes[0].engine.manager().established(NodeId(1)).is_some_and(|c| c.peer_instance() != instance)
        });
    }
    println!("restart after such a push, 10 trials: engine start to connected {}", pct(&mut restart));
}
