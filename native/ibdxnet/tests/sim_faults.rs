//! Fault injection of the simulated fabric: cut links, delay, throttling.

mod common;

use std::time::{Duration, Instant};

use common::*;
use ibdxnet::fabric::sim::SimFabric;
use ibdxnet::fabric::*;

const S: SendFlags = SendFlags::SIGNALED;

fn pair() -> (Node<SimFabric>, Node<SimFabric>) {
    connected_pair::<SimFabric>("sim_faults", NodeSpec::default()).unwrap()
}

#[test]
fn cut_link_fails_pending_and_new_sends_and_spares_other_links() {
    let (a, b) = pair();
    // A third node c, connected to a, on its own link.
    let c = Node::new(SimFabric::open(&SimFabric::config_like(&a.fabric)).unwrap(), NodeSpec::default());
    let a_to_c = a.fabric.create_qp(&a.send_cq, &a.recv_cq, &a.srq, NodeSpec::default().caps).unwrap();
    a_to_c.connect(&c.qp.endpoint()).unwrap();
    c.qp.connect(&a_to_c.endpoint()).unwrap();
    // Messages waiting for b's receive requests when b's link goes down.
    a.post_sends(&[(1, &[(0, 8)], None, S), (2, &[(0, 8)], None, S)]).unwrap();
    b.fabric.set_link_up(false);
    let s = poll_n(&a.send_cq, 2);
    assert_eq!((s[0].wr_id, s[0].status), (1, WcStatus::RetryExcErr));
    assert_eq!((s[1].wr_id, s[1].status), (2, WcStatus::WrFlushErr));
    assert_eq!(a.qp.state(), QpState::Error);
    // b's own sends fail too.
    b.post_sends(&[(3, &[(0, 8)], None, S)]).unwrap();
    assert_eq!(poll_n(&b.send_cq, 1)[0].status, WcStatus::RetryExcErr);
    // a ↔ c is unaffected.
    c.post_recvs(&[(9, &[(0, 64)])]);
    let mut batch = SendBatch::default();
    batch.push(4, &[a.buf.sge(0, 16)], Some(1), S);
    // SAFETY: the SGE lies in a's registered buffer, alive for the test.
    unsafe { a_to_c.post_send(&batch) }.unwrap();
    let done = poll_n(&a.send_cq, 1)[0];
    assert_eq!((done.wr_id, done.status, done.qp_num), (4, WcStatus::Success, a_to_c.qp_num()));
    assert_eq!(poll_n(&c.recv_cq, 1)[0].byte_len, 16);
}

#[test]
fn restored_link_carries_new_connections() {
    let (a, b) = pair();
    b.fabric.set_link_up(false);
    b.fabric.set_link_up(true);
    b.post_recvs(&[(1, &[(0, 64)])]);
    a.post_sends(&[(1, &[(0, 8)], None, S)]).unwrap();
    assert_eq!(poll_n(&a.send_cq, 1)[0].status, WcStatus::Success);
}

#[test]
fn delay_holds_messages_until_due_and_keeps_order() {
    let (a, b) = pair();
    a.fabric.set_delay(Duration::from_millis(300));
    b.post_recvs(&[(1, &[(0, 64)]), (2, &[(64, 64)])]);
    let t0 = Instant::now();
    a.post_sends(&[(1, &[(0, 8)], Some(1), S), (2, &[(0, 8)], Some(2), S)]).unwrap();
    assert!(poll_for(&b.recv_cq, Duration::from_millis(50)).is_empty(), "delivered before the delay");
    let r = poll_n(&b.recv_cq, 2);
    assert!(t0.elapsed() >= Duration::from_millis(300));
    assert_eq!(r.iter().map(|c| c.imm_data).collect::<Vec<_>>(), [Some(1), Some(2)]);
    assert_eq!(poll_n(&a.send_cq, 2).len(), 2);
}

#[test]
fn a_delayed_message_wakes_an_armed_queue_without_any_poll() {
    // The hardware delivers on its own: with a message on its way (a timer
    // pending), the receiver may arm its queue and sleep on the descriptor,
    // and the message wakes it although nothing polls any queue meanwhile.
    let (a, b) = pair();
    a.fabric.set_delay(Duration::from_millis(100));
    b.post_recvs(&[(1, &[(0, 64)])]);
    let t0 = Instant::now();
    a.post_sends(&[(1, &[(0, 8)], Some(7), S)]).unwrap();
    assert!(b.recv_cq.arm().unwrap(), "arming refused while a delivery is pending");
    let mut p = libc::pollfd { fd: b.recv_cq.wake_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let woken = unsafe { libc::poll(&mut p, 1, 5_000) } == 1;
    assert!(woken, "the delayed message did not wake the armed queue within 5 s");
    assert!(t0.elapsed() >= Duration::from_millis(100), "delivered before its delay");
    let r = poll_n(&b.recv_cq, 1)[0];
    assert_eq!((r.status, r.imm_data), (WcStatus::Success, Some(7)));
}

#[test]
fn throttle_bounds_bandwidth() {
    let (a, b) = pair();
    let rate = 20 * 1024 * 1024; // 20 MiB/s
    a.fabric.set_bandwidth(Some(rate));
    let n = 32;
    let rs: Vec<[(usize, usize); 1]> = (0..n).map(|i| [(i * 32768, 32768)]).collect();
    let recvs: Vec<(u64, &[(usize, usize)])> = rs.iter().enumerate().map(|(i, s)| (i as u64, &s[..])).collect();
    b.post_recvs(&recvs);
    let sg = [(0usize, 32768usize)];
    let sends: Vec<_> = (0..n as u64).map(|i| (i, &sg[..], None, S)).collect();
    let t0 = Instant::now();
    a.post_sends(&sends).unwrap();
    let _ = poll_n(&b.recv_cq, n);
    let secs = t0.elapsed().as_secs_f64();
    let expected = (n * 32768) as f64 / rate as f64; // 50 ms
    assert!(secs >= expected * 0.95, "1 MiB at 20 MiB/s took only {secs:.3} s");
    a.fabric.set_bandwidth(None);
}

#[test]
fn deregistered_receive_buffer_is_a_protection_error_not_a_write() {
    let (a, b) = pair();
    let mut spare = vec![0u8; 4096];
    // SAFETY: `spare` outlives the region (dropped at the end of the test).
    let mr = unsafe { b.fabric.register(spare.as_mut_ptr(), spare.len()) }.unwrap();
    let mut batch = RecvBatch::default();
    batch.push(7, &[mr.sge(0, 4096)]);
    // SAFETY: the SGE is valid at post time; it is deregistered before use on
    // purpose, and the fabric must then refuse to write it.
    unsafe { b.srq.post_recv(&batch) }.unwrap();
    drop(mr);
    a.buf.write(0, &[0xEE; 64]);
    a.post_sends(&[(1, &[(0, 64)], None, S)]).unwrap();
    let r = poll_n(&b.recv_cq, 1)[0];
    assert_eq!((r.wr_id, r.status), (7, WcStatus::LocProtErr));
    assert!(poll_n(&a.send_cq, 1)[0].status != WcStatus::Success);
    assert!(spare.iter().all(|&x| x == 0), "freed registration was written");
}

#[test]
fn cuts_within_the_retry_budget_delay_without_loss_and_longer_ones_fail() {
    let (a, b) = pair();
    a.fabric.network().set_retry_budget(Duration::from_millis(400));
    // A short cut: the messages wait and arrive in order once it is over.
    b.fabric.set_link_up(false);
    a.post_sends(&[(1, &[(0, 8)], Some(1), S), (2, &[(8, 8)], Some(2), S)]).unwrap();
    b.post_recvs(&[(1, &[(0, 64)]), (2, &[(64, 64)])]);
    assert!(poll_for(&a.send_cq, Duration::from_millis(50)).is_empty(), "nothing completes during the cut");
    b.fabric.set_link_up(true);
    let s = poll_n(&a.send_cq, 2);
    assert!(s.iter().all(|w| w.status == WcStatus::Success), "{s:?}");
    let r = poll_n(&b.recv_cq, 2);
    assert_eq!((r[0].imm_data, r[1].imm_data), (Some(1), Some(2)));
    // A cut longer than the budget: retry exceeded after about the budget.
    b.fabric.set_link_up(false);
    let t0 = Instant::now();
    a.post_sends(&[(3, &[(0, 8)], None, S)]).unwrap();
    assert_eq!(poll_n(&a.send_cq, 1)[0].status, WcStatus::RetryExcErr);
    assert!(t0.elapsed() >= Duration::from_millis(400), "{:?}", t0.elapsed());
    assert_eq!(a.qp.state(), QpState::Error);
}
