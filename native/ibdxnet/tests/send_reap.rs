//! The send thread lets go of a closed connection (its queue pair and send
//! ring) once its work requests are back, also when nothing more is sent to
//! that node. It looks at its connections' states only when the connection
//! manager counted a change (`ConManager::state_changes`), not in every
//! iteration (with 64 nodes in one process that look touched dozens of
//! connections per iteration); this checks the change is counted and seen.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::engine::{start_sim, wait_until};

use ibdxnet::con::NodeId;
use ibdxnet::loopback::StreamOptions;

#[test]
fn a_closed_connection_is_released_without_further_sends_to_its_node() {
    // One flow-control package to node 1, no data: the send thread then holds
    // the connection in its per-node state, and nothing more comes for node 1.
    let opts = StreamOptions { limit: Some(0), fc_only: 1, ..Default::default() };
    let (_net, nodes) = start_sim(2, opts, |_| {});
    let c = nodes[0].engine.connect(NodeId(1)).expect("0 → 1");
    // SAFETY: `c` (the connection of this ring) is kept until the end of the test, after the engines.
    unsafe { nodes[0].handler.add_target(NodeId(1), c.ring().address(), c.ring().size()) };
    let posted = || nodes[0].engine.stats().wrs_sent.load(std::sync::atomic::Ordering::Relaxed);
    wait_until("the flow-control package posted and confirmed", || posted() >= 1 && nodes[0].handler.all_confirmed());
    let mgr = nodes[0].engine.manager();
    let before = mgr.state_changes();
    assert!(mgr.close(NodeId(1), false), "close queued");
    // Ours is the only reference left once the manager and the send thread let go.
    let t0 = Instant::now();
    while Arc::strong_count(&c) > 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the closed connection is still held {:?} after the close ({} references; state changes {} → {})",
            t0.elapsed(),
            Arc::strong_count(&c),
            before,
            mgr.state_changes()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(mgr.state_changes() > before, "the close changed no state the count saw");
    drop(nodes);
}
