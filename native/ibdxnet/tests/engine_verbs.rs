//! The msgrc engine on real verbs (Soft-RoCE in CI's VM). Skips without an
//! RDMA device unless `IBDXNET_REQUIRE_RDMA=1`.

mod common;

use std::sync::atomic::Ordering;

use common::engine::{all_to_all, base_config, start_nodes, wait_until, Node};
use common::{rdma_required, skip_notice, verbs_config};
use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::fabric::verbs::{device_names, VerbsFabric};
use ibdxnet::fabric::FabricKind;
use ibdxnet::loopback::StreamOptions;

fn nodes(test: &str, n: u16, opts: StreamOptions) -> Option<Vec<Node<VerbsFabric>>> {
    if device_names().unwrap_or_default().is_empty() {
        assert!(!rdma_required(), "IBDXNET_REQUIRE_RDMA=1 but this host has no RDMA device ({test})");
        skip_notice(&format!("SKIPPED engine_verbs::{test}: no RDMA device on this host\n"));
        return None;
    }
    Some(start_nodes(n, opts, |i| {
        let mut c = base_config(i, FabricKind::Verbs);
        c.device = verbs_config();
        c.srq_size = 128;
        c.recv_buffer_count = 1024;
        c
    }))
}

#[test]
fn two_nodes_stream_both_ways_intact_and_in_order() {
    let limit = 16 << 20;
    let opts = StreamOptions { verify: true, limit: Some(limit), ..Default::default() };
    let Some(nodes) = nodes("two_nodes_stream_both_ways_intact_and_in_order", 2, opts) else { return };
    let _held = all_to_all(&nodes, limit);
    for n in &nodes {
        assert_eq!(n.engine.stats().errors.load(Ordering::Relaxed), 0);
    }
}

#[test]
fn silent_peer_death_is_a_disconnect_and_spares_other_connections() {
    let opts = StreamOptions { verify: true, limit: None, ..Default::default() };
    let Some(nodes) = nodes("silent_peer_death_is_a_disconnect_and_spares_other_connections", 3, opts) else { return };
    let mut held = Vec::new();
    for j in [1u16, 2] {
        let c = nodes[0].engine.connect(NodeId(j)).unwrap();
        // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
        unsafe { nodes[0].handler.add_target(NodeId(j), c.ring().address(), c.ring().size()) };
        held.push(c);
    }
    let got = |k: usize| nodes[k].handler.received.load(Ordering::Relaxed);
    wait_until("traffic to both", || got(1) > (1 << 20) && got(2) > (1 << 20));
    // Node 1 forgets node 0 (so no goodbye packet can be sent) and drops its
    // queue pair: node 0 only learns from retries running out.
    nodes[1].engine.remove_node(NodeId(0));
    wait_until("disconnect of node 1", || nodes[0].handler.events().contains(&NodeEvent::Disconnected(NodeId(1))));
    let before = got(2);
    wait_until("node 2 keeps receiving", || got(2) > before + (2 << 20));
    assert!(!nodes[0].handler.events().contains(&NodeEvent::Disconnected(NodeId(2))));
    assert_eq!(nodes[2].handler.incoming()[&0].corrupt, 0);
    assert!(nodes[0].engine.is_running());
    nodes[0].handler.stop_sending();
}

#[test]
fn orderly_close_is_two_phase_and_loses_nothing() {
    // Closed by the receiver right after the sender posted everything: the
    // work requests still on the wire arrive; both sides finish by each
    // other's Done (not at the deadline).
    const LIMIT: u64 = 512 << 10;
    let opts = StreamOptions { verify: true, limit: Some(LIMIT), ..Default::default() };
    let Some(nodes) = nodes("orderly_close_is_two_phase_and_loses_nothing", 2, opts) else { return };
    let c = nodes[1].engine.connect(NodeId(0)).unwrap();
    // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
    unsafe { nodes[1].handler.add_target(NodeId(0), c.ring().address(), c.ring().size()) };
    wait_until("all posted", || nodes[1].handler.debug_state()[0].2 == LIMIT);
    assert!(nodes[0].engine.manager().close(NodeId(1), false));
    wait_until("everything received", || nodes[0].handler.received.load(Ordering::Relaxed) == LIMIT);
    assert_eq!(nodes[0].handler.incoming()[&1].corrupt, 0);
    let stats = |n: usize| &nodes[n].engine.manager().stats;
    wait_until("both sides drained", || {
        stats(0).closes_drained.load(Ordering::Relaxed) == 1 && stats(1).closes_drained.load(Ordering::Relaxed) == 1
    });
    assert_eq!(
        stats(0).closes_timed_out.load(Ordering::Relaxed) + stats(1).closes_timed_out.load(Ordering::Relaxed),
        0
    );
    let events = nodes[1].handler.events();
    assert!(events.contains(&NodeEvent::Closed(NodeId(0))), "{events:?}");
    assert!(!events.iter().any(|e| matches!(e, NodeEvent::Lost(_) | NodeEvent::Disconnected(_))), "{events:?}");
}
