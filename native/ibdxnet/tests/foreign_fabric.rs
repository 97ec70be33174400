//! `sim` never pretends to reach a node outside its process. Two engines on
//! two sim networks stand for two processes: their devices and queue pair
//! numbers repeat each other's (both networks start at address 1, QPN 0x11),
//! so a queue pair connected to the other's endpoint would reach one of its
//! own. The exchange is refused instead, and the connect fails at once with
//! an error naming the node and the fix.

mod common;

use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::engine::{start_nodes, wait_until, Node};

use ibdxnet::con::proto::{Body, Packet};
use ibdxnet::con::{ConError, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{Fabric, FabricConfig, FabricError, Gid, QpEndpoint, QueuePair, SimOptions};
use ibdxnet::loopback::StreamOptions;
use ibdxnet::msgrc::EngineConfig;

/// The connect timeout of the engines: failing "at once" means far below it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn config(id: u16, net: &Arc<SimNetwork>) -> EngineConfig {
    let mut c = common::engine::sim_config(id, net);
    c.connect_timeout = CONNECT_TIMEOUT;
    c
}

/// Node 0 and node 1, each on a sim network of its own ("two processes").
fn two_processes() -> Vec<Node<SimFabric>> {
    let nets = [SimNetwork::new(), SimNetwork::new()];
    start_nodes(2, StreamOptions { verify: true, limit: None, ..Default::default() }, |i| {
        config(i, &nets[usize::from(i)])
    })
}

fn stat(n: &Node<SimFabric>, key: &str) -> u64 {
    n.engine.stats_map().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v).unwrap()
}

#[test]
fn connect_to_a_node_on_another_sim_network_fails_at_once_naming_node_and_fix() {
    let nodes = two_processes();
    let (a, b) = (&nodes[0], &nodes[1]);
    // The condition that misrouted: both devices have the same sim address.
    let info = |n: &Node<SimFabric>| n.engine.manager().queues().fabric.info().clone();
    assert_eq!(info(a).sim_addr, info(b).sim_addr);
    assert_ne!(info(a).sim_network, info(b).sim_network);

    let t0 = Instant::now();
    let err = b.engine.connect_timeout(NodeId(0), CONNECT_TIMEOUT).map(|_| ()).unwrap_err();
    let took = t0.elapsed();
    assert!(matches!(err, ConError::ForeignFabric { node: NodeId(0), .. }), "{err:?}");
    assert!(took < CONNECT_TIMEOUT / 10, "refused only after {took:?}");
    let text = err.to_string();
    assert!(text.starts_with("node 0 is not in this process's sim fabric"), "{text}");
    assert!(text.ends_with("sim connects nodes of one process only — use transport=nio, or an RDMA device"), "{text}");

    // Node 0 refused node 1's queue pair: its own connects fail at once too.
    let t0 = Instant::now();
    let err = a.engine.connect_timeout(NodeId(1), CONNECT_TIMEOUT).map(|_| ()).unwrap_err();
    assert!(matches!(err, ConError::ForeignFabric { node: NodeId(1), .. }), "{err:?}");
    assert!(t0.elapsed() < Duration::from_millis(100), "took {:?}", t0.elapsed());

    for n in &nodes {
        assert!(stat(n, "foreign_fabric") >= 1);
        // The job thread takes a refused connection out of the table after the
        // caller heard of the refusal (seen a moment late in the emulated VM).
        let t0 = Instant::now();
        while n.engine.manager().connection_count() != 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(n.engine.manager().connection_count(), 0, "a refused connection stays in the table");
        assert_eq!(stat(n, "connections_created") - stat(n, "connections_closed"), 0);
        // Nothing was delivered anywhere, least of all to the sender itself.
        assert_eq!(n.handler.received.load(Ordering::Relaxed), 0);
    }
}

/// A peer on an RDMA device (its exchange carries sim network 0) and a node
/// on sim: the sim node answers `WrongFabric` and fails its connects at once.
#[test]
fn an_exchange_from_an_rdma_device_is_refused_with_wrong_fabric() {
    let net = SimNetwork::new();
    let nodes = start_nodes::<SimFabric>(1, StreamOptions::default(), |i| config(i, &net));
    let n = &nodes[0];
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    n.engine.add_node(NodeId(5), peer.local_addr().unwrap()).unwrap();
    let endpoint = QpEndpoint { qpn: 0x42, psn: 7, lid: 3, gid: Gid([0; 16]), mtu: 4096, sim_addr: 0, sim_network: 0 };
    let exchange = Body::Exchange { endpoint, peer_qpn: 0, established: false, flow_unit: 1 << 20 };
    let mut buf = Vec::new();
    Packet { src: NodeId(5), dst: NodeId(0), instance: 0x77, body: exchange }.encode(&mut buf);
    let to = n.engine.manager().local_addr();
    let ours = net.id();
    let mut refused = false;
    let t0 = Instant::now();
    while !refused && t0.elapsed() < Duration::from_secs(5) {
        peer.send_to(&buf, to).unwrap();
        let mut rx = [0u8; 300];
        while let Ok(len) = peer.recv(&mut rx) {
            // Discovery may come first.
            if let Ok(p) = Packet::decode(&rx[..len]) {
                if p.body == (Body::WrongFabric { sim_network: ours }) {
                    refused = true;
                    break;
                }
            }
        }
    }
    assert!(refused, "no WrongFabric answer naming our sim network {ours:#x}");
    let err = n.engine.connect_timeout(NodeId(5), CONNECT_TIMEOUT).map(|_| ()).unwrap_err();
    assert!(matches!(err, ConError::ForeignFabric { node: NodeId(5), theirs: 0, .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("node 5 is on an RDMA device and this node on the in-process sim fabric"),
        "{err}"
    );
    assert_eq!(n.engine.manager().connection_count(), 0);

    // The node restarts (a new instance id): it is given another chance.
    Packet { src: NodeId(5), dst: NodeId(0), instance: 0x78, body: Body::Discover }.encode(&mut buf);
    peer.send_to(&buf, to).unwrap();
    wait_until("the restarted node forgiven", || {
        matches!(n.engine.connect_timeout(NodeId(5), Duration::from_millis(1)), Err(ConError::Timeout { .. }))
    });
}

/// The fabric itself refuses an endpoint of another sim network: a queue
/// pair connected to it would reach a queue pair of its own network.
#[test]
fn sim_queue_pair_refuses_an_endpoint_of_another_network() {
    let open = |net: &Arc<SimNetwork>| {
        let cfg =
            FabricConfig { sim: SimOptions { network: Some(net.clone()), ..Default::default() }, ..Default::default() };
        common::Node::new(SimFabric::open(&cfg).unwrap(), common::NodeSpec::default())
    };
    let (net_a, net_b) = (SimNetwork::new(), SimNetwork::new());
    let (a, b) = (open(&net_a), open(&net_b));
    let remote = b.qp.endpoint();
    assert_eq!((remote.sim_addr, remote.qpn), (a.qp.endpoint().sim_addr, a.qp.endpoint().qpn));
    let err = a.qp.connect(&remote).unwrap_err();
    assert_eq!(err, FabricError::ForeignEndpoint { ours: net_a.id(), theirs: net_b.id() });
    assert!(err.to_string().contains("is not in this process's sim fabric"), "{err}");
}
