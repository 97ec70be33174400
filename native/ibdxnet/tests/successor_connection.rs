//! A node's new connection posts nothing while work requests of its closing
//! predecessor are still in flight. Here they wait because the receiver has
//! no buffer (it holds all of them): posted at once, the successor's could
//! be retried into a freed buffer before the predecessor's, and the
//! receiver would see the two streams interleaved (a message cut by
//! another's bytes, found by the 64-node churn soak under load).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::engine::wait_until;

use ibdxnet::abi::{NextWorkPackage, PrevWorkResults, NWP_VALID};
use ibdxnet::con::{Connection, NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::{CompletedList, Engine, EngineConfig, EngineHandler, IncomingRing};

/// Offers one package on a given connection until the engine posts part of it.
#[derive(Default)]
struct Offerer {
    /// (connection, length) to offer.
    offer: Mutex<Option<(u32, u32)>>,
    /// Bytes posted per connection, in order of the reports.
    posted: Mutex<Vec<(u32, u32)>>,
    /// The predecessor whose work requests must be done first.
    older: Mutex<Option<Arc<Connection<SimFabric>>>>,
    /// Its work requests in flight when the successor's first bytes were posted.
    older_inflight_at_first_post: Mutex<Option<u32>>,
}

impl EngineHandler for Offerer {
    fn next_data_to_send(&self, prev: &PrevWorkResults, _completed: &CompletedList) -> NextWorkPackage {
        let mut offer = self.offer.lock().unwrap();
        if let Some((conn, _)) = *offer {
            if prev.node_id == 1 && prev.bytes_posted > 0 {
                self.posted.lock().unwrap().push((conn, prev.bytes_posted));
                if let Some(o) = self.older.lock().unwrap().as_ref() {
                    self.older_inflight_at_first_post.lock().unwrap().get_or_insert(o.inflight());
                }
                *offer = None;
                return NextWorkPackage::default();
            }
        }
        match *offer {
            Some((connection, length)) => {
                NextWorkPackage { node_id: 1, flags: NWP_VALID, offset: 0, length, connection, ..Default::default() }
            }
            None => NextWorkPackage::default(),
        }
    }
    fn received(&self, _ring: &IncomingRing) -> u32 {
        0
    }
    fn node_event(&self, _event: NodeEvent) {}
}

/// A receiver that consumes nothing (keeps every buffer) while `hold` is set.
struct Holder {
    inner: Arc<StreamHandler<SimFabric>>,
    hold: AtomicBool,
}

impl EngineHandler for Holder {
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage {
        self.inner.next_data_to_send(prev, completed)
    }
    fn received(&self, ring: &IncomingRing) -> u32 {
        if self.hold.load(Ordering::Acquire) {
            0
        } else {
            self.inner.received(ring)
        }
    }
    fn node_event(&self, event: NodeEvent) {
        self.inner.node_event(event)
    }
}

fn config(id: u16, net: &Arc<SimNetwork>) -> EngineConfig {
    let mut c = common::engine::sim_config(id, net);
    c.srq_size = 4;
    c.recv_buffer_count = 20; // more than srq_size × 4 buffers a receive
    c
}

/// More than the receiver's 20 buffers of 32 KiB hold.
const OLD_BYTES: u32 = (1 << 20) - (8 << 10);

#[test]
fn a_new_connection_posts_only_after_the_old_ones_work_requests_completed() {
    let net = SimNetwork::new();
    let h0 = Arc::new(Offerer::default());
    let e0 = Engine::<SimFabric>::start(config(0, &net), h0.clone()).unwrap();
    let inner = StreamHandler::<SimFabric>::new(NodeId(1), StreamOptions::default());
    let h1 = Arc::new(Holder { inner: inner.clone(), hold: AtomicBool::new(true) });
    let e1 = Engine::<SimFabric>::start(config(1, &net), h1.clone()).unwrap();
    inner.set_pool(e1.buffer_pool());
    e0.add_node(NodeId(1), e1.manager().local_addr()).unwrap();
    e1.add_node(NodeId(0), e0.manager().local_addr()).unwrap();

    // The old connection: more work requests than the receiver has buffers posted.
    let old = e0.connect(NodeId(1)).unwrap();
    *h0.offer.lock().unwrap() = Some((old.local_qpn(), OLD_BYTES));
    wait_until("the old connection's package posted", || h0.offer.lock().unwrap().is_none());
    std::thread::sleep(Duration::from_millis(50));
    assert!(old.inflight() > 0, "the receiver holds its buffers: work requests wait");

    // Closed in order (it drains), and the node's next connection.
    assert!(e0.manager().close(NodeId(1), false));
    wait_until("the old connection out of the table", || e0.manager().established(NodeId(1)).is_none());
    let new = e0.connect(NodeId(1)).unwrap();
    assert_ne!(new.local_qpn(), old.local_qpn());
    *h0.older.lock().unwrap() = Some(old.clone());
    *h0.offer.lock().unwrap() = Some((new.local_qpn(), 4 << 10));
    std::thread::sleep(Duration::from_millis(200));
    assert!(old.inflight() > 0);
    assert!(
        !h0.posted.lock().unwrap().iter().any(|&(c, _)| c == new.local_qpn()),
        "posted on the new connection while the old one's work requests were in flight"
    );

    // The receiver takes its data: the old work requests complete, then the new one posts.
    h1.hold.store(false, Ordering::Release);
    wait_until("the new connection's package posted", || h0.offer.lock().unwrap().is_none());
    assert_eq!(*h0.older_inflight_at_first_post.lock().unwrap(), Some(0));
    wait_until("everything received", || inner.received.load(Ordering::Relaxed) == u64::from(OLD_BYTES) + (4 << 10));
    drop((e0, e1));
}
