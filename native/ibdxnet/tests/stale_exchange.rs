//! Issue 22: a fresh queue pair is not paired by a late exchange. Under
//! churn between two nodes that connect to each other, an exchange of the
//! peer's (delayed or retried) can arrive after the pairing it was about
//! ended, naming an older queue pair of ours. Connected to the queue pair
//! it announces, our fresh one waited for an answer naming it that never
//! came and was closed by the peer's `Close` of that pairing; the caller's
//! next fresh queue pair met the next late exchange. On 64 nodes sharing
//! one loaded CPU neither side's connect came up within 10 s.
//!
//! Node 0 is a real engine; node 5 is played by a UDP socket.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use common::engine::{base_config, start_nodes};

use ibdxnet::con::proto::{Body, Packet};
use ibdxnet::con::NodeId;
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, QpEndpoint, SimOptions};
use ibdxnet::loopback::StreamOptions;

const PEER: NodeId = NodeId(5);
const PEER_INSTANCE: u32 = 0x77;

/// Sends `body` to `to` as node 5.
fn send(peer: &UdpSocket, to: SocketAddr, body: Body) {
    let mut buf = Vec::new();
    Packet { src: PEER, dst: NodeId(0), instance: PEER_INSTANCE, body }.encode(&mut buf);
    peer.send_to(&buf, to).unwrap();
}

/// The packets node 0 sends to node 5 within `d`.
fn receive_for(peer: &UdpSocket, d: Duration) -> Vec<Body> {
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut rx = [0u8; 512];
    while t0.elapsed() < d {
        if let Ok(len) = peer.recv(&mut rx) {
            if let Ok(p) = Packet::decode(&rx[..len]) {
                out.push(p.body);
            }
        }
    }
    out
}

#[test]
fn a_fresh_queue_pair_is_not_connected_by_a_late_exchange_naming_an_older_one_of_ours() {
    let net = SimNetwork::new();
    let nodes = start_nodes::<SimFabric>(1, StreamOptions::default(), |i| {
        let mut c = base_config(i, FabricKind::Sim);
        c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
        c.exchange_retry = Duration::from_millis(50);
        c
    });
    let n = &nodes[0];
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    n.engine.add_node(PEER, peer.local_addr().unwrap()).unwrap();
    let to = n.engine.manager().local_addr();
    let ours_qpn = std::thread::scope(|s| {
        let caller = s.spawn(|| n.engine.connect_timeout(PEER, Duration::from_secs(5)).map(|_| ()));
        // Node 0's fresh queue pair.
        let t0 = Instant::now();
        let ours: QpEndpoint = loop {
            assert!(t0.elapsed() < Duration::from_secs(5), "no exchange from node 0");
            let fresh = receive_for(&peer, Duration::from_millis(20)).into_iter().find_map(|b| match b {
                Body::Exchange { endpoint, peer_qpn: 0, .. } => Some(endpoint),
                _ => None,
            });
            if let Some(e) = fresh {
                break e;
            }
        };
        // A late exchange of node 5's queue pair 0x5001, connected to an older
        // queue pair of node 0's (ended: it is not the one node 0 announces).
        let older = ours.qpn + 0x1000;
        let late = QpEndpoint { qpn: 0x5001, ..ours };
        send(&peer, to, Body::Exchange { endpoint: late, peer_qpn: older, established: true, flow_unit: 1 << 20 });
        let answers = receive_for(&peer, Duration::from_millis(300));
        // Node 0 says that pairing is dead, and keeps announcing its fresh
        // queue pair, connected to nothing yet.
        assert!(
            answers.contains(&Body::Close { qpn: older }),
            "no Close of the older queue pair {older} in {answers:?}"
        );
        let exchanges: Vec<&Body> = answers.iter().filter(|b| matches!(b, Body::Exchange { .. })).collect();
        assert!(!exchanges.is_empty(), "node 0 stopped announcing its queue pair: {answers:?}");
        for b in &exchanges {
            assert!(
                matches!(b, Body::Exchange { endpoint, peer_qpn: 0, .. } if endpoint.qpn == ours.qpn),
                "node 0 paired its fresh queue pair with the late exchange: {b:?}"
            );
        }
        // Node 5's answer to the fresh queue pair: the connection comes up.
        let fresh = QpEndpoint { qpn: 0x5002, ..ours };
        send(&peer, to, Body::Exchange { endpoint: fresh, peer_qpn: ours.qpn, established: false, flow_unit: 1 << 20 });
        caller.join().unwrap().expect("connect");
        ours.qpn
    });
    let c = n.engine.manager().established(PEER).expect("established");
    assert_eq!((c.local_qpn(), c.peer_qpn()), (ours_qpn, 0x5002));
}
