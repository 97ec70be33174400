//! Fixtures of the control-plane tests against a key holder
//! (`udp_control.rs`): two keyed sim nodes, packets sealed with the group
//! key, counters by name.

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use ibdxnet::con::proto::{Packet, VERSION_KEYED};
use ibdxnet::con::{AuthKey, NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::loopback::StreamOptions;
use ibdxnet::msgrc::EngineConfig;
use sha2::Sha256;

use super::engine::{sim_config, start_nodes, wait_until, Node};
use super::rawudp::is_root;
use super::skip_notice;

pub const KEY: &[u8] = b"udp-control test key 0123456789";
/// The bound of the fixed code (`con::auth::MAX_AHEAD`), spelled out so
/// that the test builds against the code before it.
pub const STEP: u64 = 1024;

pub fn stats_of(n: &Node<SimFabric>) -> HashMap<&'static str, u64> {
    n.engine.stats_map().into_iter().collect()
}

pub fn stat(n: &Node<SimFabric>, k: &str) -> u64 {
    stats_of(n).get(k).copied().unwrap_or(0)
}

pub fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => panic!("IPv4 expected"),
    }
}

pub fn config(i: u16, net: &Arc<SimNetwork>, keyed: bool) -> EngineConfig {
    let mut c = sim_config(i, net);
    c.auth_key = keyed.then(|| AuthKey::new(KEY, "test").unwrap());
    c.discovery_interval = Duration::from_millis(50);
    c
}

/// `p` sealed with the group key and sequence number `seq`: what any key
/// holder can make.
pub fn sealed(p: &Packet, seq: u64) -> Vec<u8> {
    let mut out = Vec::new();
    p.encode(&mut out);
    out[4] = VERSION_KEYED;
    out.extend_from_slice(&seq.to_be_bytes());
    let mut m = Hmac::<Sha256>::new_from_slice(KEY).unwrap();
    m.update(&out);
    out.extend_from_slice(&m.finalize().into_bytes());
    out
}

pub fn skip_unless_root(test: &str) -> bool {
    if !is_root() {
        skip_notice(&format!("SKIPPED udp_control::{test}: spoofing source addresses needs raw sockets (root)\n"));
    }
    !is_root()
}

/// Two keyed nodes; node 1 connected to node 0 (both established).
pub fn keyed_pair(opts: StreamOptions) -> (Vec<Node<SimFabric>>, Arc<SimNetwork>) {
    keyed_pair_retrying(opts, Duration::from_millis(100))
}

/// As [`keyed_pair`], retransmitting exchanges and closes every `retry`.
pub fn keyed_pair_retrying(opts: StreamOptions, retry: Duration) -> (Vec<Node<SimFabric>>, Arc<SimNetwork>) {
    let net = SimNetwork::new();
    let nodes: Vec<Node<SimFabric>> = start_nodes(2, opts, |i| {
        let mut c = config(i, &net, true);
        c.exchange_retry = retry;
        c
    });
    nodes[1].engine.connect(NodeId(0)).expect("connect");
    wait_until("node 0 established", || nodes[0].engine.manager().established(NodeId(1)).is_some());
    (nodes, net)
}

pub fn addrs(nodes: &[Node<SimFabric>]) -> (SocketAddrV4, SocketAddrV4) {
    (v4(nodes[0].engine.manager().local_addr()), v4(nodes[1].engine.manager().local_addr()))
}

/// Node 1 closes its connection to node 0 in order; returns how long node
/// 0 took to hear it (its `Closed(1)`), or `None` within `limit`.
pub fn node_0_hears_node_1_close(nodes: &[Node<SimFabric>], limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    assert!(nodes[1].engine.manager().close(NodeId(0), false));
    while t0.elapsed() < limit {
        if nodes[0].handler.events().iter().any(|e| matches!(e, NodeEvent::Closed(NodeId(1)))) {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}
