//! `Engine::shutdown` called on one of the engine's own threads (an up-call
//! that ends its node, as a Java handler closing the node may): it returns,
//! joins every other thread, and the calling thread ends its loop after the
//! up-call, in either threading mode. Joining itself would fail (EDEADLK)
//! and panic half-way through the shutdown.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use common::engine::{base_config, wait_until};

use ibdxnet::abi::{NextWorkPackage, PrevWorkResults};
use ibdxnet::con::NodeEvent;
use ibdxnet::fabric::sim::SimFabric;
use ibdxnet::fabric::FabricKind;
use ibdxnet::msgrc::config::EngineThreads;
use ibdxnet::msgrc::{CompletedList, Engine, EngineHandler, IncomingRing, ThreadRole};

/// Shuts its own engine down from the first send up-call.
#[derive(Default)]
struct Closer {
    engine: Mutex<Option<Engine<SimFabric>>>,
    /// The thread that ran the shutdown.
    closer: Mutex<Option<ThreadId>>,
    /// 1: the shutdown returned; 2: it panicked.
    outcome: AtomicU32,
    stopped: AtomicU32,
}

impl EngineHandler for Closer {
    fn next_data_to_send(&self, _prev: &PrevWorkResults, _completed: &CompletedList) -> NextWorkPackage {
        if let Some(e) = self.engine.lock().unwrap().take() {
            *self.closer.lock().unwrap() = Some(std::thread::current().id());
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.shutdown()));
            self.outcome.store(if r.is_ok() { 1 } else { 2 }, Ordering::Release);
        }
        NextWorkPackage::default()
    }
    fn received(&self, _ring: &IncomingRing) -> u32 {
        0
    }
    fn node_event(&self, _event: NodeEvent) {}
    fn thread_stopping(&self, _role: ThreadRole) {
        self.stopped.fetch_add(1, Ordering::AcqRel);
    }
}

fn shutdown_from_the_send_up_call(mode: EngineThreads, threads: u32) {
    let mut cfg = base_config(1, FabricKind::Sim);
    cfg.engine_threads = mode;
    let h = Arc::new(Closer::default());
    let e = Engine::<SimFabric>::start(cfg, h.clone()).expect("engine start");
    *h.engine.lock().unwrap() = Some(e);
    e_wake(&h);
    wait_until("the shutdown inside the up-call to end", || h.outcome.load(Ordering::Acquire) != 0);
    assert_eq!(h.outcome.load(Ordering::Acquire), 1, "shutdown on an engine thread panicked");
    assert_ne!(*h.closer.lock().unwrap(), Some(std::thread::current().id()));
    // Every engine thread (the job thread too) ends, the caller's own after its up-call returned.
    wait_until("every engine thread to stop", || h.stopped.load(Ordering::Acquire) == threads);
}

/// The first up-call may already have run before the engine was handed
/// over: another is due once the send thread wakes.
fn e_wake(h: &Closer) {
    if let Some(e) = h.engine.lock().unwrap().as_ref() {
        e.wake_send();
    }
}

#[test]
fn shutdown_inside_a_send_up_call_returns_and_every_thread_ends_dedicated() {
    shutdown_from_the_send_up_call(EngineThreads::Dedicated, 3);
}

#[test]
fn shutdown_inside_a_send_up_call_returns_and_every_thread_ends_shared() {
    shutdown_from_the_send_up_call(EngineThreads::Shared, 2);
}
