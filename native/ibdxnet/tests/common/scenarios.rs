//! Engine scenarios on `sim` that run once per threading mode:
//! `engine_sim.rs` calls them with `dedicated` (a send and a receive thread
//! per node), `engine_shared.rs` with `shared` (one thread does both). A lost
//! wake-up in either mode shows as a stream that stalls.
#![allow(dead_code)]

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibdxnet::con::{ConError, ConState, NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, SimOptions};
use ibdxnet::loopback::StreamOptions;
use ibdxnet::msgrc::config::EngineThreads;
use ibdxnet::msgrc::EngineConfig;

use super::engine::{all_to_all, base_config, start_nodes, stream_bytes, wait_until, Node};

pub type SimNode = Node<SimFabric>;

/// `n` engines on one sim network in `threads` mode, settings changed by `tweak`.
pub fn start(
    n: u16,
    threads: EngineThreads,
    opts: StreamOptions,
    tweak: impl Fn(&mut EngineConfig),
) -> (Arc<SimNetwork>, Vec<SimNode>) {
    let net = SimNetwork::new();
    let nodes = start_nodes(n, opts, |i| {
        let mut c = base_config(i, FabricKind::Sim);
        c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
        c.engine_threads = threads;
        tweak(&mut c);
        c
    });
    (net, nodes)
}

fn verified(limit: u64) -> StreamOptions {
    StreamOptions { verify: true, limit: Some(limit), ..Default::default() }
}

/// Two nodes stream to each other: intact, in order, no error, and every
/// buffer not posted on the SRQ is back in the pool afterwards (none leaked).
/// Returns the nodes for checks of the caller.
pub fn two_nodes_stream_both_ways(threads: EngineThreads) -> Vec<SimNode> {
    let limit = stream_bytes();
    let (_net, nodes) = start(2, threads, verified(limit), |_| {});
    let _held = all_to_all(&nodes, limit);
    for n in &nodes {
        assert_eq!(n.engine.stats().errors.load(Relaxed), 0);
        let p = n.engine.buffer_pool();
        wait_until("buffers back", || p.available() as u32 == p.registered_buffers() - p.posted());
    }
    nodes
}

/// Four nodes, each streaming `limit` bytes to every other.
pub fn four_nodes_all_to_all(threads: EngineThreads, limit: u64) {
    let (_net, nodes) = start(4, threads, verified(limit), |_| {});
    let _held = all_to_all(&nodes, limit);
}

/// Few receive buffers and a tiny incoming ring: the SRQ runs dry while the
/// receiver lags (receiver not ready), buffers given back must wake the
/// engine; nothing is lost.
pub fn stalled_consumer_without_loss(threads: EngineThreads) {
    let (_net, nodes) = start(2, threads, verified(8 << 20), |c| {
        c.srq_size = 4;
        c.recv_buffer_count = 5 * 4;
        c.incoming_ring_size = 8;
    });
    let _held = all_to_all(&nodes, 8 << 20);
}

/// A send queue of two entries: a full queue is reported to the handler as
/// unposted data, send completions wake the engine, nothing is lost.
pub fn tiny_send_queue_loses_nothing(threads: EngineThreads) {
    let (_net, nodes) = start(2, threads, verified(4 << 20), |c| {
        c.sq_size = 2;
        c.signal_interval = 2;
        c.recv_buffer_size = 1024;
        c.recv_sges_per_wr = 1;
        c.srq_size = 64;
        c.recv_buffer_count = 256;
    });
    let _held = all_to_all(&nodes, 4 << 20);
    for n in &nodes {
        assert!(n.handler.unposted_reports.load(Relaxed) > 0, "a full send queue was never reported");
    }
}

/// An orderly close finishes on both sides once both are done, long before
/// its 60 s deadline; a handle kept out does not hold it up (it only keeps
/// the ring's memory).
pub fn orderly_close_finishes_on_both_sides(threads: EngineThreads) {
    let (_net, nodes) = start(2, threads, StreamOptions::default(), |c| c.connect_timeout = Duration::from_secs(60));
    let e = &nodes[0].engine;
    let c = e.connect(NodeId(1)).unwrap();
    let qpn = c.local_qpn();
    let t0 = Instant::now();
    assert!(e.manager().close(NodeId(1), false));
    wait_until("closed", || e.manager().node_of_qpn(qpn).is_none());
    assert_eq!(c.state(), ConState::Closed);
    let drained = |n: usize| nodes[n].engine.manager().stats.closes_drained.load(Relaxed);
    wait_until("the peer's side closed too", || drained(1) == 1);
    assert_eq!(
        drained(0),
        1,
        "{:?} / {:?}",
        nodes[0].engine.manager().stats_map(),
        nodes[1].engine.manager().stats_map()
    );
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert!(nodes[1].handler.events().contains(&NodeEvent::Closed(NodeId(0))));
}

/// Removing a node closes its connection, reports it invalidated, and later
/// connects to it fail as unknown.
pub fn node_removal_closes_and_invalidates(threads: EngineThreads) {
    let (_net, nodes) = start(2, threads, StreamOptions::default(), |_| {});
    let c = nodes[0].engine.connect(NodeId(1)).unwrap_or_else(|e| {
        for n in &nodes {
            eprintln!(
                "{:?} {:?} nodes {:?} conns {}",
                n.engine.manager(),
                n.engine.manager().stats,
                n.engine.manager().nodes(),
                n.engine.manager().connection_count()
            );
        }
        panic!("{e}")
    });
    drop(c);
    assert!(nodes[0].engine.remove_node(NodeId(1)));
    wait_until("invalidated", || nodes[0].handler.events().contains(&NodeEvent::Invalidated(NodeId(1))));
    wait_until("closed", || nodes[0].engine.manager().connection_count() == 0);
    assert!(matches!(nodes[0].engine.connect(NodeId(1)).unwrap_err(), ConError::UnknownNode(_)));
}
