//! Receiver not ready on the simulated fabric: senders waiting on an empty
//! shared receive queue are released oldest first, as many as receive
//! requests are posted, and the others are not retried meanwhile.

mod common;

use std::time::Duration;

use common::*;
use ibdxnet::fabric::sim::SimFabric;
use ibdxnet::fabric::*;

const S: SendFlags = SendFlags::SIGNALED;

#[test]
fn posted_receives_release_the_oldest_waiting_senders_without_retrying_the_rest() {
    let (a, b) = connected_pair::<SimFabric>("sim_rnr", NodeSpec::default()).unwrap();
    // No retries on the timer thread meanwhile: only posts release waiters
    // here, and the counts below are exact.
    a.fabric.network().set_rnr_retry_interval(Duration::from_secs(3600));
    let caps = NodeSpec::default().caps;
    // Eight queue pairs from a to b, all of b's on its one SRQ.
    let mut others = Vec::new();
    for _ in 1..8 {
        let qa = a.fabric.create_qp(&a.send_cq, &a.recv_cq, &a.srq, caps).unwrap();
        let qb = b.fabric.create_qp(&b.send_cq, &b.recv_cq, &b.srq, caps).unwrap();
        qa.connect(&qb.endpoint()).unwrap();
        qb.connect(&qa.endpoint()).unwrap();
        others.push((qa, qb));
    }
    let senders: Vec<&_> = std::iter::once(&a.qp).chain(others.iter().map(|(qa, _)| qa)).collect();
    // One message each, in this order, to an SRQ without receive requests.
    for (i, qp) in senders.iter().enumerate() {
        let mut batch = SendBatch::default();
        batch.push(i as u64, &[a.buf.sge(0, 16)], Some(i as u32), S);
        // SAFETY: the SGE lies in a's registered buffer, alive for the test.
        unsafe { qp.post_send(&batch) }.unwrap();
    }
    assert_eq!(b.srq.refusals(), 8, "each sender found the SRQ empty once");
    // Receive requests in batches of 1, 3 and 4: each releases the oldest
    // waiters, in order; nothing in the post retries a sender that stays
    // waiting (before, every post retried all of them: 7 + 4 refusals here).
    let mut next = 0u32;
    for (k, batch) in [1usize, 3, 4].into_iter().enumerate() {
        let before = b.srq.refusals();
        let wrs: Vec<(u64, [(usize, usize); 1])> =
            (0..batch).map(|j| (100 + next as u64 + j as u64, [((next as usize + j) * 64, 64)])).collect();
        let wrs: Vec<(u64, &[(usize, usize)])> = wrs.iter().map(|(id, s)| (*id, &s[..])).collect();
        b.post_recvs(&wrs);
        assert_eq!(b.srq.refusals(), before, "batch {k}: a post retried a waiting sender it had no request for");
        for c in poll_n(&b.recv_cq, batch) {
            assert_eq!((c.status, c.imm_data), (WcStatus::Success, Some(next)), "batch {k}: oldest first");
            next += 1;
        }
    }
    assert_eq!(next, 8);
    let sent = poll_n(&a.send_cq, 8);
    assert!(sent.iter().all(|c| c.status == WcStatus::Success), "{sent:?}");
}
