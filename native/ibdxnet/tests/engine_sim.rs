//! The msgrc engine on `sim`: nodes in one process, connected over UDP on
//! 127.0.0.1, streaming with integrity and order checks.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::engine::{self, all_to_all, stream_bytes, wait_until};
use common::scenarios;
use ibdxnet::msgrc::config::EngineThreads;

use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::Engine;

type Node = engine::Node<SimFabric>;

use engine::{sim_config as config, start_sim as start};

#[test]
fn two_nodes_stream_both_ways_intact_and_in_order() {
    scenarios::two_nodes_stream_both_ways(EngineThreads::Dedicated);
}

fn stat(n: &Node, key: &str) -> u64 {
    n.engine.stats_map().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v).unwrap()
}

/// The receive pool starts with one slab (512 buffers of 32 KiB), registers
/// more under load (256 receive requests × 4 buffers posted at full load),
/// loses nothing, and reports its memory.
#[test]
fn the_receive_pool_grows_under_load_and_reports_its_memory() {
    let opts =
        StreamOptions { verify: true, limit: Some(64 << 20), package_sizes: vec![64, 1000, 70000, 200], fc_only: 0 };
    let (_net, nodes) = start(2, opts, |_| {});
    for n in &nodes {
        assert_eq!(stat(n, "recv_pool_slabs"), 1);
        assert_eq!(stat(n, "recv_pool_bytes"), 512 * 32768);
        assert!(stat(n, "posted_buffers") <= 256, "at most half the first slab posted at start");
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    let (max_slabs, max_posted) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let (mut slabs, mut posted) = (0, 0);
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                for n in &nodes {
                    slabs = slabs.max(stat(n, "recv_pool_slabs"));
                    posted = posted.max(stat(n, "posted_buffers"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            (slabs, posted)
        });
        let _held = all_to_all(&nodes, 64 << 20);
        done.store(true, std::sync::atomic::Ordering::Release);
        sampler.join().unwrap()
    });
    assert!(max_slabs >= 2, "the pool never grew (max {max_slabs} slabs, {max_posted} buffers posted)");
    assert!(max_posted > 256, "the posting target never grew ({max_posted} buffers posted)");
    for n in &nodes {
        let slabs = stat(n, "recv_pool_slabs");
        assert_eq!(stat(n, "recv_pool_bytes"), slabs * 512 * 32768);
        assert_eq!(stat(n, "bytes_per_connection"), 1 << 20, "the send ring of base_config");
        assert!(stat(n, "bytes_per_node") > stat(n, "recv_pool_bytes") + (1 << 20));
        assert_eq!(stat(n, "errors"), 0);
    }
}

#[test]
fn four_nodes_all_to_all_intact_and_in_order() {
    scenarios::four_nodes_all_to_all(EngineThreads::Dedicated, stream_bytes() / 2);
}

#[test]
fn edge_package_sizes_wrap_and_slice_correctly() {
    // Receive requests of 2 × 4 KiB, rings of 64 KiB: sizes around one
    // buffer, one WR, and the ring size force slicing and wrap-around.
    let ring = 64 << 10;
    let sizes = vec![1, 4096, 4097, 8192, 8193, ring - 1, 3, ring, 12345];
    let opts = StreamOptions { verify: true, limit: Some(8 << 20), package_sizes: sizes, ..Default::default() };
    let (_net, nodes) = start(2, opts, |c| {
        c.send_ring_size = ring;
        c.recv_buffer_size = 4096;
        c.recv_sges_per_wr = 2;
        c.recv_buffer_count = 1024;
    });
    let _held = all_to_all(&nodes, 8 << 20);
}

#[test]
fn flow_control_only_packages_are_zero_length_messages() {
    let fc_only = 500;
    let opts = StreamOptions { verify: true, limit: Some(1 << 20), fc_only, ..Default::default() };
    let (_net, nodes) = start(2, opts, |_| {});
    let _held = all_to_all(&nodes, 1 << 20);
    for (i, n) in nodes.iter().enumerate() {
        let from = n.handler.incoming()[&(1 - i as u16)].clone();
        assert_eq!(from.fc, fc_only * u64::from(ibdxnet::loopback::FC_UNIT), "node {i}");
    }
}

#[test]
fn tiny_send_queue_reports_unposted_data_and_loses_nothing() {
    scenarios::tiny_send_queue_loses_nothing(EngineThreads::Dedicated);
}

#[test]
fn stalled_consumer_is_receiver_not_ready_without_loss() {
    scenarios::stalled_consumer_without_loss(EngineThreads::Dedicated);
}

#[test]
fn simultaneous_connect_converges_to_one_connection() {
    let (_net, nodes) = start(2, StreamOptions::default(), |_| {});
    let (a, b) = (&nodes[0].engine, &nodes[1].engine);
    std::thread::scope(|s| {
        let x = s.spawn(|| a.connect(NodeId(1)).expect("a→b"));
        let y = s.spawn(|| b.connect(NodeId(0)).expect("b→a"));
        let (ca, cb) = (x.join().unwrap(), y.join().unwrap());
        assert_eq!(ca.peer_qpn(), cb.local_qpn());
        assert_eq!(cb.peer_qpn(), ca.local_qpn());
    });
    assert_eq!(a.manager().connection_count(), 1);
    assert_eq!(b.manager().connection_count(), 1);
}

#[test]
fn connect_to_unreachable_node_times_out_with_a_typed_error() {
    let (_net, nodes) = start(1, StreamOptions::default(), |_| {});
    let e = &nodes[0].engine;
    // A UDP port nobody listens on.
    let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    e.add_node(NodeId(9), dead.local_addr().unwrap()).unwrap();
    drop(dead);
    let t0 = Instant::now();
    let err = e.connect_timeout(NodeId(9), Duration::from_millis(300)).unwrap_err();
    assert!(matches!(err, ibdxnet::con::ConError::Timeout { .. }), "{err}");
    assert!(t0.elapsed() >= Duration::from_millis(300));
    assert!(matches!(e.connect(NodeId(77)).unwrap_err(), ibdxnet::con::ConError::UnknownNode(_)));
    assert!(matches!(e.connect(NodeId(0)).unwrap_err(), ibdxnet::con::ConError::SelfConnection));
}

#[test]
fn a_closing_owner_ends_a_waiting_connect_at_once() {
    // DXNet's close waits for every native call in progress: a connect to a
    // node that went away must not hold it for its whole timeout.
    let (_net, nodes) = start(1, StreamOptions::default(), |_| {});
    let e = &nodes[0].engine;
    let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    e.add_node(NodeId(9), dead.local_addr().unwrap()).unwrap();
    drop(dead);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let t0 = Instant::now();
            (e.connect_timeout(NodeId(9), Duration::from_secs(10)).unwrap_err(), t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(200)); // it waits by now
        e.manager().refuse_connects();
        let (err, waited) = waiter.join().unwrap();
        assert!(matches!(err, ibdxnet::con::ConError::ShutDown), "{err}");
        assert!(waited < Duration::from_secs(2), "the connect waited {waited:?}");
    });
    assert!(matches!(
        e.connect_timeout(NodeId(9), Duration::from_secs(10)).unwrap_err(),
        ibdxnet::con::ConError::ShutDown
    ));
}

#[test]
fn link_cut_mid_stream_disconnects_only_that_node() {
    let (_net, nodes) = start(3, StreamOptions { verify: true, limit: None, ..Default::default() }, |_| {});
    let mut held = Vec::new();
    for j in [1u16, 2] {
        let c = nodes[0].engine.connect(NodeId(j)).unwrap();
        // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
        unsafe { nodes[0].handler.add_target(NodeId(j), c.ring().address(), c.ring().size()) };
        held.push(c);
    }
    wait_until("traffic to both", || {
        nodes[1].handler.received.load(std::sync::atomic::Ordering::Relaxed) > (1 << 20)
            && nodes[2].handler.received.load(std::sync::atomic::Ordering::Relaxed) > (1 << 20)
    });
    // Cut node 1's link: only it is reported disconnected.
    let fabric_of_1 = nodes[1].engine.manager().queues().fabric.clone();
    fabric_of_1.set_link_up(false);
    wait_until("disconnect of node 1", || nodes[0].handler.events().contains(&NodeEvent::Disconnected(NodeId(1))));
    let before = nodes[2].handler.received.load(std::sync::atomic::Ordering::Relaxed);
    wait_until("node 2 keeps receiving", || {
        nodes[2].handler.received.load(std::sync::atomic::Ordering::Relaxed) > before + (4 << 20)
    });
    assert!(!nodes[0].handler.events().contains(&NodeEvent::Disconnected(NodeId(2))));
    assert_eq!(nodes[2].handler.incoming()[&0].corrupt, 0);
    nodes[0].handler.stop_sending();
}

#[test]
fn peer_restart_is_detected_and_a_new_connection_is_built() {
    let net = SimNetwork::new();
    let h0 = StreamHandler::<SimFabric>::new(NodeId(0), StreamOptions::default());
    let e0 = Engine::<SimFabric>::start(config(0, &net), h0.clone()).unwrap();
    h0.set_pool(e0.buffer_pool());
    let start1 = |port: u16| {
        let h = StreamHandler::<SimFabric>::new(NodeId(1), StreamOptions::default());
        let mut c = config(1, &net);
        c.listen = format!("127.0.0.1:{port}").parse().unwrap();
        let e = Engine::<SimFabric>::start(c, h.clone()).unwrap();
        h.set_pool(e.buffer_pool());
        (e, h)
    };
    let (e1, _h1) = start1(0);
    let port = e1.manager().local_addr().port();
    e0.add_node(NodeId(1), e1.manager().local_addr()).unwrap();
    e1.add_node(NodeId(0), e0.manager().local_addr()).unwrap();
    let first = e0.connect(NodeId(1)).unwrap();
    let first_peer = first.peer_qpn();
    let old_instance = first.peer_instance();
    drop(first);
    e1.shutdown();
    // The peer restarts on the same address with a new instance id.
    let (e1, _h1) = start1(port);
    e1.add_node(NodeId(0), e0.manager().local_addr()).unwrap();
    let again = e1.connect(NodeId(0)).expect("restarted peer connects");
    wait_until("node 0 sees the new instance", || {
        e0.manager().established(NodeId(1)).is_some_and(|c| c.peer_instance() != old_instance)
    });
    assert!(
        h0.events()
            .iter()
            .any(|e| matches!(e, NodeEvent::Left { node: NodeId(1), .. } | NodeEvent::Disconnected(NodeId(1)))),
        "{:?}",
        h0.events()
    );
    let now = e0.manager().established(NodeId(1)).unwrap();
    assert_eq!(now.peer_qpn(), again.local_qpn());
    let _ = first_peer;
}

#[test]
fn node_removal_closes_and_invalidates() {
    scenarios::node_removal_closes_and_invalidates(EngineThreads::Dedicated);
}

#[test]
fn invalid_configuration_starts_nothing() {
    let net = SimNetwork::new();
    let mut c = config(3, &net);
    c.recv_buffer_count = 1;
    let h = StreamHandler::<SimFabric>::new(NodeId(3), StreamOptions::default());
    let err = Engine::<SimFabric>::start(c, h).unwrap_err();
    assert!(err.to_string().contains("recv_buffer_count"), "{err}");
}

#[test]
fn connection_limit_evicts_the_least_recently_used() {
    let (_net, nodes) = start(4, StreamOptions::default(), |c| c.max_connections = 2);
    let e = &nodes[0].engine;
    let c1 = e.connect(NodeId(1)).unwrap();
    std::thread::sleep(Duration::from_millis(40)); // idle long enough to be evicted
    let c2 = e.connect(NodeId(2)).unwrap();
    c2.touch();
    drop((c1, c2));
    let _c3 = e.connect(NodeId(3)).unwrap();
    // An eviction is an orderly close, not a failure.
    wait_until("eviction of node 1", || nodes[0].handler.events().contains(&NodeEvent::Closed(NodeId(1))));
    assert!(!nodes[0].handler.events().contains(&NodeEvent::Disconnected(NodeId(1))));
    assert!(e.manager().connection_count() <= 2);
    assert!(e.manager().established(NodeId(2)).is_some(), "the more recently used connection stays");
}

#[test]
fn orderly_close_without_an_answer_is_taken_down_at_the_deadline() {
    let (_net, nodes) = start(2, StreamOptions::default(), |c| c.connect_timeout = Duration::from_millis(1500));
    let e = &nodes[0].engine;
    let c = e.connect_timeout(NodeId(1), Duration::from_secs(30)).unwrap();
    let qpn = c.local_qpn();
    // Node 1 goes silent: its `Done` never comes.
    nodes[1].engine.manager().set_packet_loss(1);
    assert!(e.manager().close(NodeId(1), false));
    wait_until("removed from the table", || e.manager().connection_count() == 0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.state(), ibdxnet::con::ConState::Closing, "the peer has not said it is done");
    assert_eq!(e.manager().node_of_qpn(qpn), Some(NodeId(1)));
    wait_until("closed at the deadline", || c.state() == ibdxnet::con::ConState::Closed);
    let stats = &e.manager().stats;
    assert_eq!(stats.closes_timed_out.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(stats.closes_drained.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn orderly_close_finishes_on_both_sides_once_both_are_done() {
    scenarios::orderly_close_finishes_on_both_sides(EngineThreads::Dedicated);
}

#[test]
fn orderly_close_keeps_the_queue_pair_up_until_data_in_flight_arrived() {
    // Node 1's messages take 400 ms to arrive; node 0 closes while they are
    // on the wire. A fixed linger shorter than that took the queue pair down
    // under them (Lost at node 1); the two-phase close waits for node 1's Done.
    const LIMIT: u64 = 64 << 10;
    let opts = StreamOptions { verify: true, limit: Some(LIMIT), ..Default::default() };
    let (_net, nodes) = start(2, opts, |_| {});
    let c = nodes[1].engine.connect(NodeId(0)).unwrap();
    nodes[1].engine.manager().queues().fabric.set_delay(Duration::from_millis(400));
    // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
    unsafe { nodes[1].handler.add_target(NodeId(0), c.ring().address(), c.ring().size()) };
    wait_until("all posted", || nodes[1].handler.debug_state()[0].2 == LIMIT);
    assert!(nodes[0].handler.received.load(std::sync::atomic::Ordering::Relaxed) < LIMIT, "delay too short");
    assert!(nodes[0].engine.manager().close(NodeId(1), false));
    wait_until("everything received", || nodes[0].handler.received.load(std::sync::atomic::Ordering::Relaxed) == LIMIT);
    assert_eq!(nodes[0].handler.incoming()[&1].corrupt, 0);
    let stats = |n: usize| &nodes[n].engine.manager().stats;
    wait_until("both sides drained", || {
        stats(0).closes_drained.load(std::sync::atomic::Ordering::Relaxed) == 1
            && stats(1).closes_drained.load(std::sync::atomic::Ordering::Relaxed) == 1
    });
    let events = nodes[1].handler.events();
    assert!(events.contains(&NodeEvent::Closed(NodeId(0))), "{events:?}");
    assert!(!events.iter().any(|e| matches!(e, NodeEvent::Lost(_) | NodeEvent::Disconnected(_))), "{events:?}");
}

#[test]
fn lost_exchange_packets_are_retransmitted() {
    let (_net, nodes) = start(2, StreamOptions::default(), |c| c.exchange_retry = Duration::from_millis(20));
    // Every second packet of each side is lost.
    for n in &nodes {
        n.engine.manager().set_packet_loss(2);
    }
    let c = nodes[0].engine.connect(NodeId(1)).expect("connects despite loss");
    assert!(c.is_established());
    wait_until("both sides established", || nodes[1].engine.manager().established(NodeId(0)).is_some());
}

/// Offers one package for a connection id that is not the node's current
/// connection: the engine must post nothing and say so.
struct StaleRing {
    target: std::sync::Mutex<Option<u32>>,
    reported: std::sync::Mutex<Vec<ibdxnet::msgrc::PrevWorkResults>>,
}

impl ibdxnet::msgrc::EngineHandler for StaleRing {
    fn next_data_to_send(
        &self,
        prev: &ibdxnet::msgrc::PrevWorkResults,
        _: &ibdxnet::msgrc::CompletedList,
    ) -> ibdxnet::msgrc::NextWorkPackage {
        if prev.node_id != 0xFFFF {
            self.reported.lock().unwrap().push(*prev);
        }
        match self.target.lock().unwrap().take() {
            Some(stale) => ibdxnet::msgrc::NextWorkPackage {
                node_id: 1,
                flags: ibdxnet::msgrc::NWP_VALID,
                offset: 0,
                length: 100,
                connection: stale,
                ..Default::default()
            },
            None => Default::default(),
        }
    }
    fn received(&self, _: &ibdxnet::msgrc::IncomingRing) -> u32 {
        0
    }
    fn node_event(&self, _: NodeEvent) {}
}

#[test]
fn package_for_a_replaced_connection_is_not_posted() {
    let net = SimNetwork::new();
    let h0 = Arc::new(StaleRing { target: std::sync::Mutex::new(None), reported: std::sync::Mutex::new(Vec::new()) });
    let e0 = Engine::<SimFabric>::start(config(0, &net), h0.clone()).unwrap();
    let h1 = StreamHandler::<SimFabric>::new(NodeId(1), StreamOptions::default());
    let e1 = Engine::<SimFabric>::start(config(1, &net), h1.clone()).unwrap();
    h1.set_pool(e1.buffer_pool());
    e0.add_node(NodeId(1), e1.manager().local_addr()).unwrap();
    e1.add_node(NodeId(0), e0.manager().local_addr()).unwrap();
    let c = e0.connect(NodeId(1)).unwrap();
    *h0.target.lock().unwrap() = Some(c.local_qpn() + 1000);
    wait_until("the package's outcome", || !h0.reported.lock().unwrap().is_empty());
    let r = h0.reported.lock().unwrap()[0];
    assert_eq!((r.bytes_posted, r.bytes_not_posted), (0, 100));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(h1.received.load(std::sync::atomic::Ordering::Relaxed), 0, "nothing was sent from the new ring");
}

#[test]
fn immediate_data_naming_another_node_closes_only_that_connection() {
    // Node 1 claims to be node 2 in its immediate data: node 0 refuses it
    // (its queue pair belongs to node 1), counts it, closes that connection,
    // and node 2's own stream to node 0 is untouched.
    let (_net, nodes) = start(3, StreamOptions { verify: true, limit: None, ..Default::default() }, |_| {});
    let mut held = Vec::new();
    for j in [1usize, 2] {
        let c = nodes[j].engine.connect(NodeId(0)).unwrap();
        // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
        unsafe { nodes[j].handler.add_target(NodeId(0), c.ring().address(), c.ring().size()) };
        held.push(c);
    }
    let from = |n: u16| nodes[0].handler.incoming().get(&n).map_or(0, |s| s.bytes);
    wait_until("traffic from both", || from(1) > (1 << 20) && from(2) > (1 << 20));
    let violations = |n: &Node| n.engine.stats().protocol_violations.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(violations(&nodes[0]), 0);
    nodes[1].engine.manager().set_forged_imm_source(Some(NodeId(2)));
    wait_until("the forgery refused", || violations(&nodes[0]) > 0);
    wait_until("node 1's connection closed", || {
        nodes[0].handler.events().contains(&NodeEvent::Disconnected(NodeId(1)))
    });
    let before = from(2);
    wait_until("node 2 keeps sending", || from(2) > before + (4 << 20));
    // Nothing of node 1's was taken for node 2's: its stream verifies.
    assert_eq!(nodes[0].handler.incoming()[&2].corrupt, 0);
    assert!(!nodes[0].handler.events().contains(&NodeEvent::Disconnected(NodeId(2))));
    // The engines stop before the rings their handlers write into are released.
    drop(nodes);
    drop(held);
}
