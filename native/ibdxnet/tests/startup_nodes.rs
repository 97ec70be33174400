//! `dropped_foreign` at start-up. A node that already has us in its node
//! table sends discovery (and exchanges) before we have it in ours; such
//! packets are dropped and counted as foreign. Nodes given in the start
//! configuration (`node.<id>`, what Java passes from `DXNetConfig.nodes`)
//! are in the table before the first packet is read, so a clean start
//! counts none; a node added later is known only from then on, and its
//! retries (discovery each interval, exchanges each retry) get through.

mod common;

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use common::engine::wait_until;

use ibdxnet::con::NodeId;
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::{Engine, EngineConfig};

fn config(id: u16, net: &Arc<SimNetwork>) -> EngineConfig {
    let mut c = common::engine::sim_config(id, net);
    // Discovery every millisecond: a start-up window of any length sees packets.
    c.discovery_interval = Duration::from_millis(1);
    c
}

fn start(c: EngineConfig) -> Engine<SimFabric> {
    let _ = env_logger::Builder::from_default_env().is_test(true).try_init();
    let me = c.node_id;
    Engine::start(c, StreamHandler::<SimFabric>::new(me, StreamOptions::default())).expect("engine start")
}

fn stat(e: &Engine<SimFabric>, key: &str) -> u64 {
    e.stats_map().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v).unwrap()
}

fn free_port() -> std::net::SocketAddr {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

#[test]
fn nodes_of_the_start_configuration_are_known_before_the_first_packet_is_read() {
    let net = SimNetwork::new();
    let b_addr = free_port();
    let a = start(config(0, &net));
    // Node 0 knows node 1 before it runs: its discovery reaches node 1's
    // socket from the moment it is bound, long before node 1 has started.
    a.add_node(NodeId(1), b_addr).unwrap();
    let mut c = config(1, &net);
    c.listen = b_addr;
    c.nodes = vec![(NodeId(0), a.manager().local_addr())];
    let b = start(c);
    wait_until("node 1 hears node 0", || b.manager().is_discovered(NodeId(0)));
    b.connect(NodeId(0)).expect("connect");
    assert_eq!(stat(&b, "dropped_foreign"), 0, "{:?}", b.stats_map());
    assert_eq!(stat(&a, "dropped_foreign"), 0, "{:?}", a.stats_map());
}

#[test]
fn packets_of_a_node_not_yet_in_the_table_are_dropped_as_foreign_then_its_retries_get_through() {
    let net = SimNetwork::new();
    let b = start(config(1, &net));
    let a = start(config(0, &net));
    a.add_node(NodeId(1), b.manager().local_addr()).unwrap();
    wait_until("node 0's discovery dropped by node 1", || stat(&b, "dropped_foreign") >= 1);
    assert!(!b.manager().is_discovered(NodeId(0)));
    b.add_node(NodeId(0), a.manager().local_addr()).unwrap();
    wait_until("node 1 hears node 0", || b.manager().is_discovered(NodeId(0)));
    b.connect(NodeId(0)).expect("connect");
    let dropped = stat(&b, "dropped_foreign");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(stat(&b, "dropped_foreign"), dropped, "still dropping once the node is known");
    for e in [&a, &b] {
        assert_eq!(stat(e, "dropped_spoofed") + stat(e, "dropped_malformed"), 0, "{:?}", e.stats_map());
    }
}
