//! Fabric conformance suite: every behaviour the engine relies on, run
//! against `sim` and `verbs` with the same test bodies.

mod common;

use std::time::Duration;

use common::*;
use ibdxnet::fabric::*;

const S: SendFlags = SendFlags::SIGNALED;

conformance!(
    open_reports_device_limits,
    send_with_imm_scatters_over_sges_in_order,
    zero_length_send_carries_imm_only,
    chained_posts_deliver_in_chain_order,
    inline_data_is_copied_at_post_time,
    inline_beyond_max_is_refused,
    send_queue_depth_is_enforced,
    unsignaled_slots_are_freed_by_later_signaled_completion,
    receive_too_small_is_a_length_error_on_both_sides,
    empty_srq_holds_messages_without_loss,
    sge_outside_registered_memory_is_a_protection_error,
    peer_destroyed_gives_retry_exceeded_then_flush,
    connect_to_nonexistent_remote_fails_on_send,
    cq_overrun_is_reported,
    set_error_flushes_outstanding_sends,
    sizes_beyond_device_limits_are_refused,
    unknown_device_and_bad_port_are_refused,
    post_on_unconnected_qp_is_refused,
    error_state_is_unreachable_from_reset,
    concurrent_senders_share_srq_and_cqs,
    an_armed_queue_wakes_its_descriptor_at_the_next_completion_only,
);

fn open_reports_device_limits<F: TestFabric>(test: &str) {
    let Some((a, _)) = F::open_two(test) else { return };
    let i = a.info();
    assert!(i.max_qp_wr >= 16 && i.max_sge >= 2 && i.max_srq_wr >= 16 && i.max_srq_sge >= 2, "{i:?}");
    assert!(i.max_cqe >= 64, "{i:?}");
    assert!([256, 512, 1024, 2048, 4096].contains(&i.active_mtu), "{i:?}");
    match i.link_layer {
        LinkLayer::Ethernet => assert!(!i.gid.is_zero() && i.gid_index.is_some(), "RoCE needs a GID: {i:?}"),
        LinkLayer::InfiniBand => assert!(i.lid != 0, "InfiniBand needs a LID: {i:?}"),
        LinkLayer::Sim => assert!(i.sim_addr != 0),
    }
}

fn send_with_imm_scatters_over_sges_in_order<F: TestFabric>(test: &str) {
    let Some((a, b)) = connected_pair::<F>(test, NodeSpec::default()) else { return };
    let data = pattern(1, 8192);
    a.buf.write(0, &data);
    // Receiver: 3 requests of 2 SGEs × 1024 bytes each, scattered in the buffer.
    b.post_recvs(&[
        (10, &[(0, 1024), (4096, 1024)]),
        (11, &[(8192, 1024), (16384, 1024)]),
        (12, &[(24576, 1024), (32768, 1024)]),
    ]);
    // Sender: one 1-SGE message, one 2-SGE (wrap-around shape), one exactly 2 KiB.
    a.post_sends(&[
        (1, &[(0, 700)], Some(0xA1B2_C3D4), S),
        (2, &[(6000, 1000), (0, 500)], Some(7), S),
        (3, &[(1000, 2048)], None, S),
    ])
    .unwrap();
    let sends = poll_n(&a.send_cq, 3);
    assert_eq!(sends.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(sends.iter().all(|c| c.status == WcStatus::Success && c.opcode == WcOpcode::Send), "{sends:?}");
    assert!(sends.iter().all(|c| c.qp_num == a.qp.qp_num()));
    let recvs = poll_n(&b.recv_cq, 3);
    assert!(recvs.iter().all(|c| c.status == WcStatus::Success && c.opcode == WcOpcode::Recv), "{recvs:?}");
    assert_eq!(
        recvs.iter().map(|c| (c.wr_id, c.byte_len, c.imm_data)).collect::<Vec<_>>(),
        [(10, 700, Some(0xA1B2_C3D4)), (11, 1500, Some(7)), (12, 2048, None)]
    );
    assert!(recvs.iter().all(|c| c.qp_num == b.qp.qp_num()), "qp_num names the receiving QP");
    assert_eq!(b.buf.read(0, 700), data[..700]);
    let second: Vec<u8> = [&data[6000..7000], &data[..500]].concat();
    assert_eq!(b.buf.read(8192, 1024), second[..1024]);
    assert_eq!(b.buf.read(16384, 476), second[1024..]);
    assert_eq!(b.buf.read(24576, 1024), data[1000..2024]);
    assert_eq!(b.buf.read(32768, 1024), data[2024..3048]);
}

fn zero_length_send_carries_imm_only<F: TestFabric>(test: &str) {
    let Some((a, b)) = connected_pair::<F>(test, NodeSpec::default()) else { return };
    b.post_recvs(&[(5, &[(0, 64)])]);
    a.post_sends(&[(9, &[], Some(0x0003_7F00), S)]).unwrap();
    assert_eq!(poll_n(&a.send_cq, 1)[0].status, WcStatus::Success);
    let r = poll_n(&b.recv_cq, 1)[0];
    assert_eq!((r.status, r.wr_id, r.byte_len, r.imm_data), (WcStatus::Success, 5, 0, Some(0x0003_7F00)));
}

fn chained_posts_deliver_in_chain_order<F: TestFabric>(test: &str) {
    let Some((a, b)) = connected_pair::<F>(test, NodeSpec::default()) else { return };
    let n = 64usize;
    let recv_sges: Vec<[(usize, usize); 1]> = (0..n).map(|i| [(i * 256, 256)]).collect();
    let recvs: Vec<(u64, &[(usize, usize)])> = (0..n).map(|i| (1000 + i as u64, &recv_sges[i][..])).collect();
    b.post_recvs(&recvs);
    for i in 0..n {
        a.buf.write(i * 128, &pattern(i as u64, 128));
    }
    let send_sges: Vec<[(usize, usize); 1]> = (0..n).map(|i| [(i * 128, 1 + i)]).collect();
    let sends: Vec<_> = (0..n).map(|i| (i as u64, &send_sges[i][..], Some(i as u32), S)).collect();
    a.post_sends(&sends).unwrap();
    let sc = poll_n(&a.send_cq, n);
    assert_eq!(sc.iter().map(|c| c.wr_id).collect::<Vec<_>>(), (0..n as u64).collect::<Vec<_>>());
    let rc = poll_n(&b.recv_cq, n);
    for (i, c) in rc.iter().enumerate() {
        assert_eq!(
            (c.status, c.wr_id, c.byte_len, c.imm_data),
            (WcStatus::Success, 1000 + i as u64, 1 + i as u32, Some(i as u32))
        );
        assert_eq!(b.buf.read(i * 256, 1 + i), pattern(i as u64, 128)[..1 + i]);
    }
}

fn inline_data_is_copied_at_post_time<F: TestFabric>(test: &str) {
    let spec =
        NodeSpec { caps: QpCaps { max_send_wr: 64, max_send_sge: 4, max_inline_data: 64 }, ..Default::default() };
    let Some((a, b)) = connected_pair::<F>(test, spec) else { return };
    assert!(a.qp.caps().max_inline_data >= 64, "granted {:?}", a.qp.caps());
    // No receive posted yet: the message cannot be delivered at post time.
    a.buf.write(0, b"inline payload!!");
    a.post_sends(&[(1, &[(0, 16)], None, S | SendFlags::INLINE)]).unwrap();
    a.buf.write(0, b"OVERWRITTEN.....");
    b.post_recvs(&[(2, &[(0, 64)])]);
    assert_eq!(poll_n(&a.send_cq, 1)[0].status, WcStatus::Success);
    let r = poll_n(&b.recv_cq, 1)[0];
    assert_eq!((r.status, r.byte_len), (WcStatus::Success, 16));
    assert_eq!(b.buf.read(0, 16), b"inline payload!!");
}

fn inline_beyond_max_is_refused<F: TestFabric>(test: &str) {
    let spec =
        NodeSpec { caps: QpCaps { max_send_wr: 64, max_send_sge: 4, max_inline_data: 32 }, ..Default::default() };
    let Some((a, _b)) = connected_pair::<F>(test, spec) else { return };
    let too_big = a.qp.caps().max_inline_data as usize + 1;
    let err = a.post_sends(&[(1, &[(0, too_big)], None, S | SendFlags::INLINE)]).unwrap_err();
    assert_eq!(err.posted, 0);
    assert!(err.error.errno().is_some(), "{err}");
}

fn send_queue_depth_is_enforced<F: TestFabric>(test: &str) {
    let spec = NodeSpec { caps: QpCaps { max_send_wr: 16, max_send_sge: 1, max_inline_data: 0 }, ..Default::default() };
    let Some((a, b)) = connected_pair::<F>(test, spec) else { return };
    let depth = a.qp.caps().max_send_wr as usize;
    assert!(depth >= 16);
    // The receiver has no receive requests: nothing completes, every slot stays used.
    let sges = [(0usize, 8usize)];
    let wrs: Vec<_> = (0..depth as u64).map(|i| (i, &sges[..], None, S)).collect();
    a.post_sends(&wrs).expect("the granted depth can be posted");
    // Beyond it the queue must report full (`ENOMEM`). The sim does so at
    // exactly `depth`; providers may round their queues up (Soft-RoCE does).
    let mut accepted = depth;
    let err = loop {
        match a.post_sends(&[(accepted as u64, &sges[..], None, S)]) {
            Ok(()) => accepted += 1,
            Err(e) => break e,
        }
        assert!(accepted <= 4 * depth + 64, "{accepted} requests accepted on a queue of {depth}");
    };
    assert!(err.is_queue_full() && err.posted == 0, "{err}");
    if F::KIND == FabricKind::Sim {
        assert_eq!(accepted, depth);
    }
    // Receives make room: everything accepted completes, in order, and posting works again.
    let rs: Vec<[(usize, usize); 1]> = (0..accepted).map(|i| [(i * 64, 64)]).collect();
    let recvs: Vec<(u64, &[(usize, usize)])> = rs.iter().enumerate().map(|(i, s)| (i as u64, &s[..])).collect();
    b.post_recvs(&recvs);
    let done = poll_n(&a.send_cq, accepted);
    assert!(done.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(done.iter().map(|c| c.wr_id).collect::<Vec<_>>(), (0..accepted as u64).collect::<Vec<_>>());
    b.post_recvs(&[(500, &[(0, 64)])]);
    a.post_sends(&[(1000, &sges[..], None, S)]).unwrap();
    assert_eq!(poll_n(&a.send_cq, 1)[0].wr_id, 1000);
}

fn unsignaled_slots_are_freed_by_later_signaled_completion<F: TestFabric>(test: &str) {
    let spec = NodeSpec {
        caps: QpCaps { max_send_wr: 16, max_send_sge: 1, max_inline_data: 0 },
        srq_wr: 256,
        ..Default::default()
    };
    let Some((a, b)) = connected_pair::<F>(test, spec) else { return };
    let depth = a.qp.caps().max_send_wr as usize;
    let sges = [(0usize, 32usize)];
    let rs = [(0usize, 64usize)];
    // Ten times the queue depth, signalling only every `depth`-th request.
    let rounds = 10;
    for round in 0..rounds {
        let recvs: Vec<(u64, &[(usize, usize)])> = (0..depth).map(|i| (i as u64, &rs[..])).collect();
        b.post_recvs(&recvs);
        let wrs: Vec<_> = (0..depth)
            .map(|i| ((round * depth + i) as u64, &sges[..], None, if i == depth - 1 { S } else { SendFlags::NONE }))
            .collect();
        a.post_sends(&wrs).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let c = poll_n(&a.send_cq, 1);
        assert_eq!((c[0].status, c[0].wr_id), (WcStatus::Success, (round * depth + depth - 1) as u64));
        let r = poll_n(&b.recv_cq, depth);
        assert!(r.iter().all(|c| c.status == WcStatus::Success && c.byte_len == 32));
    }
    assert!(poll_for(&a.send_cq, Duration::from_millis(20)).is_empty(), "unsignaled requests produced completions");
}

fn receive_too_small_is_a_length_error_on_both_sides<F: TestFabric>(test: &str) {
    let Some((a, b)) = connected_pair::<F>(test, NodeSpec::default()) else { return };
    b.post_recvs(&[(1, &[(0, 16)]), (2, &[(64, 4096)])]);
    a.post_sends(&[(10, &[(0, 64)], None, S), (11, &[(0, 8)], None, S)]).unwrap();
    let r = poll_n(&b.recv_cq, 1)[0];
    // Hardware reports a local length error; Soft-RoCE a local QP operation error.
    assert_eq!(r.wr_id, 1);
    assert!(matches!(r.status, WcStatus::LocLenErr | WcStatus::LocQpOpErr), "{r:?}");
    let s = poll_n(&a.send_cq, 2);
    assert_eq!(s[0].wr_id, 10);
    assert!(matches!(s[0].status, WcStatus::RemInvReqErr | WcStatus::RemOpErr), "{s:?}");
    assert_eq!((s[1].wr_id, s[1].status), (11, WcStatus::WrFlushErr));
    assert_eq!(a.qp.state(), QpState::Error);
    assert_eq!(b.qp.state(), QpState::Error);
}

fn empty_srq_holds_messages_without_loss<F: TestFabric>(test: &str) {
    let Some((a, b)) = connected_pair::<F>(test, NodeSpec::default()) else { return };
    let n = 8usize;
    for i in 0..n {
        a.buf.write(i * 100, &pattern(100 + i as u64, 100));
    }
    let sges: Vec<[(usize, usize); 1]> = (0..n).map(|i| [(i * 100, 100)]).collect();
    let wrs: Vec<_> = (0..n).map(|i| (i as u64, &sges[i][..], Some(i as u32), S)).collect();
    a.post_sends(&wrs).unwrap();
    // Receiver not ready: nothing arrives, nothing completes.
    assert!(poll_for(&b.recv_cq, Duration::from_millis(50)).is_empty());
    assert!(poll_for(&a.send_cq, Duration::from_millis(10)).is_empty());
    // Hand out receive requests one at a time: each releases exactly the next message.
    for i in 0..n {
        b.post_recvs(&[(50 + i as u64, &[(i * 128, 128)])]);
        let r = poll_n(&b.recv_cq, 1)[0];
        assert_eq!(
            (r.status, r.wr_id, r.byte_len, r.imm_data),
            (WcStatus::Success, 50 + i as u64, 100, Some(i as u32))
        );
        assert_eq!(b.buf.read(i * 128, 100), pattern(100 + i as u64, 100));
    }
    let s = poll_n(&a.send_cq, n);
    assert!(s.iter().all(|c| c.status == WcStatus::Success));
}

fn sge_outside_registered_memory_is_a_protection_error<F: TestFabric>(test: &str) {
    let Some((a, b)) = connected_pair::<F>(test, NodeSpec::default()) else { return };
    b.post_recvs(&[(1, &[(0, 4096)]), (2, &[(4096, 4096)])]);
    let good = a.buf.sge(0, 64);
    let outside = Sge { addr: good.addr + a.buf.mem.len() as u64, length: 64, lkey: good.lkey };
    let mut batch = SendBatch::default();
    batch.push(1, &[outside], None, S);
    batch.push(2, &[good], None, S);
    // SAFETY: the second SGE is valid; the first is deliberately outside the
    // region (the fabric must refuse it without touching the memory).
    unsafe { a.qp.post_send(&batch) }.expect("post is accepted; the error comes as a completion");
    let s = poll_n(&a.send_cq, 2);
    assert_eq!((s[0].wr_id, s[0].status), (1, WcStatus::LocProtErr), "{s:?}");
    assert_eq!((s[1].wr_id, s[1].status), (2, WcStatus::WrFlushErr), "{s:?}");
    assert_eq!(a.qp.state(), QpState::Error);
    assert!(poll_for(&b.recv_cq, Duration::from_millis(20)).is_empty(), "nothing was delivered");
}

fn peer_destroyed_gives_retry_exceeded_then_flush<F: TestFabric>(test: &str) {
    let Some((a, b)) = connected_pair::<F>(test, NodeSpec::default()) else { return };
    b.post_recvs(&[(1, &[(0, 4096)])]);
    a.post_sends(&[(1, &[(0, 64)], None, S)]).unwrap();
    assert_eq!(poll_n(&a.send_cq, 1)[0].status, WcStatus::Success);
    drop(b);
    a.post_sends(&[(2, &[(0, 64)], None, S), (3, &[(0, 64)], None, S), (4, &[(0, 64)], None, S)]).unwrap();
    let s = poll_n(&a.send_cq, 3);
    assert_eq!((s[0].wr_id, s[0].status), (2, WcStatus::RetryExcErr), "{s:?}");
    assert!(s[1..].iter().all(|c| c.status == WcStatus::WrFlushErr), "{s:?}");
    assert_eq!(a.qp.state(), QpState::Error);
}

fn connect_to_nonexistent_remote_fails_on_send<F: TestFabric>(test: &str) {
    let Some((fa, fb)) = F::open_two(test) else { return };
    let a = Node::new(fa, NodeSpec::default());
    let ghost_ep = {
        let ghost = Node::new(fb, NodeSpec::default());
        ghost.qp.endpoint()
    }; // the remote QP is destroyed here: its number leads nowhere
    a.qp.connect(&ghost_ep).expect("connecting does not contact the remote");
    a.post_sends(&[(7, &[(0, 10)], None, S), (8, &[(0, 10)], None, S)]).unwrap();
    let s = poll_n(&a.send_cq, 2);
    assert_eq!((s[0].wr_id, s[0].status), (7, WcStatus::RetryExcErr), "{s:?}");
    assert_eq!((s[1].wr_id, s[1].status), (8, WcStatus::WrFlushErr), "{s:?}");
    // A malformed endpoint is refused up front.
    let fresh = Node::new(F::open(&F::config_like(&a.fabric)).unwrap(), NodeSpec::default());
    let err = fresh.qp.connect(&QpEndpoint { qpn: 0, ..ghost_ep }).unwrap_err();
    assert!(matches!(err, FabricError::InvalidArgument(_)), "{err}");
}

fn cq_overrun_is_reported<F: TestFabric>(test: &str) {
    let spec = NodeSpec { cqe: 8, ..Default::default() };
    let Some((a, b)) = connected_pair::<F>(test, spec) else { return };
    let cap = b.recv_cq.capacity() as usize;
    let n = cap + 4;
    let rs = [(0usize, 64usize)];
    let recvs: Vec<(u64, &[(usize, usize)])> = (0..n).map(|i| (i as u64, &rs[..])).collect();
    b.post_recvs(&recvs);
    let sges = [(0usize, 8usize)];
    // Unsignaled sends so the sender's own (small) CQ does not overrun.
    for i in 0..n {
        let f = if i == n - 1 { S } else { SendFlags::NONE };
        a.post_sends(&[(i as u64, &sges[..], None, f)]).unwrap();
    }
    let _ = poll_n(&a.send_cq, 1);
    let mut buf = [WorkCompletion::default(); 64];
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        match b.recv_cq.poll(&mut buf) {
            Err(FabricError::CqOverrun) => break,
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => assert!(
                std::time::Instant::now() < deadline,
                "overrun of a {cap}-entry CQ by {n} completions not reported"
            ),
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn set_error_flushes_outstanding_sends<F: TestFabric>(test: &str) {
    let Some((a, _b)) = connected_pair::<F>(test, NodeSpec::default()) else { return };
    // No receives at the peer: the requests stay outstanding (receiver not ready).
    a.post_sends(&[(1, &[(0, 8)], None, S), (2, &[(0, 8)], None, S)]).unwrap();
    assert!(poll_for(&a.send_cq, Duration::from_millis(20)).is_empty());
    a.qp.set_error().unwrap();
    let s = poll_n(&a.send_cq, 2);
    assert!(s.iter().all(|c| c.status == WcStatus::WrFlushErr), "{s:?}");
    assert_eq!(s.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1, 2]);
    // Requests posted in ERROR are flushed too.
    a.post_sends(&[(3, &[(0, 8)], None, S)]).unwrap();
    assert_eq!(poll_n(&a.send_cq, 1)[0].status, WcStatus::WrFlushErr);
}

fn sizes_beyond_device_limits_are_refused<F: TestFabric>(test: &str) {
    let Some((f, _)) = F::open_two(test) else { return };
    let i = f.info().clone();
    let limit = |e: FabricError, what: &str| match e {
        FabricError::Limit { what: w, .. } => assert_eq!(w, what),
        e => panic!("expected a {what} limit error, got {e}"),
    };
    limit(f.create_cq(i.max_cqe + 1).unwrap_err(), "cqe");
    limit(f.create_srq(i.max_srq_wr + 1, 1).unwrap_err(), "max_srq_wr");
    limit(f.create_srq(16, i.max_srq_sge + 1).unwrap_err(), "max_srq_sge");
    let cq = f.create_cq(16).unwrap();
    let srq = f.create_srq(16, 1).unwrap();
    let caps = QpCaps { max_send_wr: 16, max_send_sge: 1, max_inline_data: 0 };
    limit(f.create_qp(&cq, &cq, &srq, QpCaps { max_send_wr: i.max_qp_wr + 1, ..caps }).unwrap_err(), "max_send_wr");
    limit(f.create_qp(&cq, &cq, &srq, QpCaps { max_send_sge: i.max_sge + 1, ..caps }).unwrap_err(), "max_send_sge");
    let e = f.create_qp(&cq, &cq, &srq, QpCaps { max_inline_data: 1 << 20, ..caps }).unwrap_err();
    assert!(e.to_string().contains("max_inline_data"), "{e}");
    assert!(matches!(f.create_cq(0).unwrap_err(), FabricError::Limit { .. }));
}

fn unknown_device_and_bad_port_are_refused<F: TestFabric>(test: &str) {
    let Some((f, _)) = F::open_two(test) else { return };
    let mut cfg = F::config_like(&f);
    cfg.device = Some("no_such_dev9".into());
    let e = F::open(&cfg).unwrap_err();
    assert!(matches!(e, FabricError::UnknownDevice { .. }), "{e}");
    assert!(e.to_string().contains("no_such_dev9"), "{e}");
    let mut cfg = F::config_like(&f);
    cfg.port = 77;
    let e = F::open(&cfg).unwrap_err();
    assert!(matches!(e, FabricError::BadPort { port: 77, .. }), "{e}");
}

fn post_on_unconnected_qp_is_refused<F: TestFabric>(test: &str) {
    let Some((f, _)) = F::open_two(test) else { return };
    let n = Node::new(f, NodeSpec::default());
    assert_eq!(n.qp.state(), QpState::Reset);
    let e = n.post_sends(&[(1, &[(0, 8)], None, S)]).unwrap_err();
    assert_eq!(e.posted, 0);
    assert!(poll_for(&n.send_cq, Duration::from_millis(10)).is_empty());
}

/// RESET → ERR is not a verbs transition (rxe answers EINVAL): a queue pair
/// that never connected is simply destroyed.
fn error_state_is_unreachable_from_reset<F: TestFabric>(test: &str) {
    let Some((f, _)) = F::open_two(test) else { return };
    let n = Node::new(f, NodeSpec::default());
    match n.qp.set_error() {
        Err(FabricError::Verbs { errno, .. }) => assert_eq!(errno, libc::EINVAL),
        other => panic!("RESET -> ERR: {other:?}"),
    }
    assert_eq!(n.qp.state(), QpState::Reset);
}

fn concurrent_senders_share_srq_and_cqs<F: TestFabric>(test: &str) {
    // Two sender QPs on node A (sharing A's CQs) to two QPs on node B that share
    // one SRQ and one receive CQ; both senders post from their own thread.
    let Some((fa, fb)) = F::open_two(test) else { return };
    let per_sender = 2000u64;
    let a = Node::new(fa, NodeSpec::default());
    let b = Node::new(fb, NodeSpec { srq_wr: 256, cqe: 4096, ..Default::default() });
    let caps = NodeSpec::default().caps;
    let a2 = a.fabric.create_qp(&a.send_cq, &a.recv_cq, &a.srq, caps).unwrap();
    let b2 = b.fabric.create_qp(&b.send_cq, &b.recv_cq, &b.srq, caps).unwrap();
    a.qp.connect(&b.qp.endpoint()).unwrap();
    b.qp.connect(&a.qp.endpoint()).unwrap();
    a2.connect(&b2.endpoint()).unwrap();
    b2.connect(&a2.endpoint()).unwrap();
    for i in 0..2 {
        a.buf.write(i * 4096, &pattern(i as u64, 4096));
    }
    let send_cq = &a.send_cq;
    let buf = &a.buf;
    let (qp1, qp2) = (&a.qp, &a2);
    let totals = std::thread::scope(|s| {
        let receiver = s.spawn(|| {
            // Keep the SRQ topped up and count per source QP.
            let mut got = std::collections::HashMap::<u32, Vec<u32>>::new();
            let mut posted = 0u64;
            let mut batch = [WorkCompletion::default(); 32];
            let mut done = 0u64;
            let deadline = std::time::Instant::now() + WAIT;
            while done < 2 * per_sender {
                while posted < done + 200 {
                    b.post_recvs(&[(posted, &[(((posted % 256) * 4096) as usize % (1 << 20), 4096)])]);
                    posted += 1;
                }
                let n = b.recv_cq.poll(&mut batch).unwrap();
                for c in &batch[..n] {
                    assert_eq!(c.status, WcStatus::Success);
                    got.entry(c.qp_num).or_default().push(c.imm_data.unwrap());
                }
                done += n as u64;
                assert!(std::time::Instant::now() < deadline, "received {done}");
            }
            got
        });
        let send = |qp: &F::Qp, base: usize| {
            let mut b = SendBatch::default();
            let mut outstanding = 0u64;
            for i in 0..per_sender {
                b.clear();
                b.push(i, &[buf.sge(base, 64)], Some(i as u32), S);
                // SAFETY: the SGE lies in `buf`, alive for the whole scope.
                while let Err(e) = unsafe { qp.post_send(&b) } {
                    assert!(e.is_queue_full(), "{e}");
                    std::thread::yield_now();
                }
                outstanding += 1;
            }
            outstanding
        };
        let t1 = s.spawn(move || send(qp1, 0));
        let t2 = s.spawn(move || send(qp2, 4096));
        // Drain the shared send CQ on this thread while the senders run.
        let mut polled = 0;
        let mut wc = [WorkCompletion::default(); 32];
        let deadline = std::time::Instant::now() + WAIT;
        while polled < 2 * per_sender {
            let n = send_cq.poll(&mut wc).unwrap();
            assert!(wc[..n].iter().all(|c| c.status == WcStatus::Success), "{:?}", &wc[..n]);
            polled += n as u64;
            assert!(std::time::Instant::now() < deadline);
        }
        (t1.join().unwrap() + t2.join().unwrap(), receiver.join().unwrap())
    });
    assert_eq!(totals.0, 2 * per_sender);
    let got = totals.1;
    assert_eq!(got.len(), 2, "two receiving QPs");
    for seq in got.values() {
        assert_eq!(seq, &(0..per_sender as u32).collect::<Vec<_>>(), "per-QP order");
    }
}

/// True if `fd` becomes readable within `ms`.
fn readable_within(fd: std::os::fd::RawFd, ms: i32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

fn an_armed_queue_wakes_its_descriptor_at_the_next_completion_only<F: TestFabric>(test: &str) {
    let Some((a, b)) = connected_pair::<F>(test, NodeSpec::default()) else { return };
    b.post_recvs(&[(1, &[(0, 64)]), (2, &[(64, 64)]), (3, &[(128, 64)])]);
    // Not armed: a completion arrives without a wake-up.
    a.post_sends(&[(1, &[(0, 8)], Some(1), S)]).unwrap();
    assert_eq!(poll_n(&b.recv_cq, 1).len(), 1);
    assert!(!readable_within(b.recv_cq.wake_fd(), 100), "{test}: woken without arming");
    // Armed, empty: the next completion wakes the descriptor …
    assert!(b.recv_cq.arm().unwrap(), "{test}: no timers pending, arming must work");
    assert!(poll_for(&b.recv_cq, Duration::ZERO).is_empty());
    a.post_sends(&[(2, &[(0, 8)], Some(2), S)]).unwrap();
    assert!(readable_within(b.recv_cq.wake_fd(), 5_000), "{test}: an armed queue did not wake");
    b.recv_cq.clear_wake().unwrap();
    assert_eq!(poll_n(&b.recv_cq, 1)[0].wr_id, 2);
    // … once: without arming again, the following one does not.
    a.post_sends(&[(3, &[(0, 8)], Some(3), S)]).unwrap();
    assert_eq!(poll_n(&b.recv_cq, 1)[0].wr_id, 3);
    assert!(!readable_within(b.recv_cq.wake_fd(), 100), "{test}: woken twice by one arming");
    assert_eq!(poll_n(&a.send_cq, 3).len(), 3);
}
