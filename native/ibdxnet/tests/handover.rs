//! The idempotent completion hand-over: a handler that acknowledges each
//! hand-over itself fails (reports nothing applied, acknowledges nothing) on
//! every few `next_data_to_send` calls while two nodes stream to each other;
//! the engine hands the confirmations again, and the streams complete with
//! every byte confirmed exactly once (`all_to_all` checks both directions).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::engine::{self, all_to_all, base_config, start_engines};

use ibdxnet::abi::{NextWorkPackage, PrevWorkResults};
use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, SimOptions};
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::{CompletedList, EngineHandler, IncomingRing, ThreadRole};

/// Fails every `every`-th send up-call before applying anything.
struct Flaky {
    inner: Arc<StreamHandler<SimFabric>>,
    every: u64,
    calls: AtomicU64,
    failed: AtomicU64,
    /// Failed calls that had something to apply (a confirmation or a previous package).
    failed_with_data: AtomicU64,
}

impl EngineHandler for Flaky {
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if n % self.every == 0 {
            self.failed.fetch_add(1, Ordering::Relaxed);
            if !completed.is_empty() || prev.bytes_posted > 0 {
                self.failed_with_data.fetch_add(1, Ordering::Relaxed);
            }
            return NextWorkPackage::default();
        }
        let next = self.inner.next_data_to_send(prev, completed);
        completed.acknowledge();
        next
    }
    fn acknowledges_handover(&self) -> bool {
        true
    }
    fn received(&self, ring: &IncomingRing) -> u32 {
        self.inner.received(ring)
    }
    fn node_event(&self, event: NodeEvent) {
        self.inner.node_event(event)
    }
    fn thread_started(&self, role: ThreadRole) {
        self.inner.thread_started(role)
    }
    fn thread_stopping(&self, role: ThreadRole) {
        self.inner.thread_stopping(role)
    }
}

#[test]
fn failed_send_upcalls_lose_and_repeat_no_confirmation() {
    let net = SimNetwork::new();
    let limit = 8 << 20;
    let opts = StreamOptions { verify: true, limit: Some(limit), ..Default::default() };
    let flaky: Vec<Arc<Flaky>> = (0..2u16)
        .map(|i| {
            Arc::new(Flaky {
                inner: StreamHandler::new(NodeId(i), opts.clone()),
                every: 3,
                calls: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                failed_with_data: AtomicU64::new(0),
            })
        })
        .collect();
    let started = start_engines(
        2,
        |i| flaky[i as usize].clone(),
        |i| {
            let mut c = base_config(i, FabricKind::Sim);
            c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
            c
        },
    );
    let nodes: Vec<engine::Node<SimFabric>> = started
        .into_iter()
        .map(|(engine, h)| {
            h.inner.set_pool(engine.buffer_pool());
            engine::Node { engine, handler: h.inner.clone() }
        })
        .collect();
    // Streams both ways; panics unless every byte is confirmed and arrives intact.
    let _held = all_to_all(&nodes, limit);
    for f in &flaky {
        let (failed, with_data) = (f.failed.load(Ordering::Relaxed), f.failed_with_data.load(Ordering::Relaxed));
        eprintln!("failed up-calls {failed}, with confirmations or a package pending {with_data}");
        assert!(with_data > 0, "failures with confirmations pending");
        let s = f.inner.debug_state();
        for (node, written, posted, confirmed) in s {
            assert_eq!(confirmed, limit, "node {node}: confirmed exactly once");
            assert_eq!((written, posted), (limit, limit), "node {node}: nothing unconfirmed");
        }
    }
}
