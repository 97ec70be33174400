use super::*;

const A: NodeId = NodeId(1);
const B: NodeId = NodeId(2);

fn keyed() -> Auth {
    Auth::new(Some(AuthKey::new(b"0123456789abcdef-test", "test").unwrap()))
}

/// Seals `body` as instance `instance` of A (to B) and lets `rx` check it.
fn deliver(tx: &Auth, rx: &Auth, instance: u32, body: Body, rx_instance: u32) -> (Verdict, Vec<u8>) {
    let mut buf = Vec::new();
    tx.encode(&Packet { src: A, dst: B, instance, body }, &mut buf);
    (check(rx, &buf, rx_instance), buf)
}

fn check(rx: &Auth, buf: &[u8], rx_instance: u32) -> Verdict {
    let (p, seal) = Packet::decode_any(buf).expect("decodes");
    rx.check(&p, seal, buf, rx_instance, Instant::now())
}

/// Runs the challenge for instance `instance` of A (sender `tx`) at `rx`.
fn admit(tx: &Auth, rx: &Auth, instance: u32) {
    let (v, _) = deliver(tx, rx, instance, Body::Discover, 77);
    let Verdict::Reply(Body::Challenge { instance: i, nonce }) = v else { panic!("{v:?}") };
    assert_eq!(i, instance);
    let (v, _) = deliver(tx, rx, instance, Body::Response { nonce }, 77);
    assert_eq!(v, Verdict::Admitted);
}

#[test]
fn window_accepts_each_number_once_and_nothing_too_old_or_too_far_ahead() {
    let mut w = ReplayWindow::default();
    assert_eq!(w.accept(0), Seq::Replayed);
    for s in [5, 3, 4, 200, 100, 73] {
        assert_eq!(w.accept(s), Seq::Fresh, "{s}");
    }
    for s in [5, 3, 200, 100, 72, 1] {
        assert_eq!(w.accept(s), Seq::Replayed, "{s} again or too old");
    }
    assert_eq!(w.accept(199), Seq::Fresh);
    assert_eq!(w.accept(1000), Seq::Fresh);
    assert_eq!(w.accept(1000 - WINDOW), Seq::Replayed);
    // Beyond the bound: refused, and the window stays where it was.
    for s in [1000 + MAX_AHEAD + 1, u64::MAX] {
        assert_eq!(w.accept(s), Seq::TooFarAhead, "{s}");
    }
    assert_eq!((w.highest, w.accept(999)), (1000, Seq::Fresh));
    assert_eq!(w.accept(1000 + MAX_AHEAD), Seq::Fresh, "exactly the bound");
}

#[test]
fn a_resync_keeps_the_window_when_it_can_and_resets_it_when_it_must() {
    let mut w = ReplayWindow { highest: 500, seen: 1 };
    w.resync(498);
    assert_eq!((w.highest, w.accept(498)), (500, Seq::Replayed), "in the window: recorded, no reset");
    assert_eq!(w.accept(499), Seq::Fresh, "the rest of the window still open");
    w.resync(40);
    assert_eq!(w.highest, 40, "pushed past the sender: reset to its number");
    assert_eq!((w.accept(40), w.accept(39), w.accept(41)), (Seq::Replayed, Seq::Replayed, Seq::Fresh));
    w.resync(41 + 5 * MAX_AHEAD);
    assert_eq!(w.highest, 41 + 5 * MAX_AHEAD, "a sender beyond the bound is followed");
}

/// Seals `p` as a key holder would, with any sequence number.
fn sealed_with_seq(key: &[u8], p: &Packet, seq: u64) -> Vec<u8> {
    let mut out = Vec::new();
    p.encode(&mut out);
    out[4] = VERSION_KEYED;
    out.extend_from_slice(&seq.to_be_bytes());
    let tag = mac_of(key, &out).finalize().into_bytes();
    out.extend_from_slice(&tag);
    out
}

const KEY: &[u8] = b"0123456789abcdef-test";

#[test]
fn sequence_numbers_count_per_destination() {
    let tx = keyed();
    let seq = |dst: u16| {
        let mut b = Vec::new();
        tx.encode(&Packet { src: A, dst: NodeId(dst), instance: 1, body: Body::Discover }, &mut b);
        Packet::decode_sealed(&b).unwrap().1.seq
    };
    assert_eq!([seq(2), seq(3), seq(3), seq(2), seq(4)], [1, 1, 2, 2, 1]);
}

#[test]
fn a_far_future_sequence_number_is_refused_and_does_not_lock_the_node_out() {
    let (tx, rx) = (keyed(), keyed());
    admit(&tx, &rx, 9);
    assert_eq!(deliver(&tx, &rx, 9, Body::Discover, 77).0, Verdict::Accept);
    // A key holder's packet far ahead: refused and counted, not accepted.
    let p = Packet { src: A, dst: B, instance: 9, body: Body::Discover };
    let far = sealed_with_seq(KEY, &p, 1 << 40);
    assert!(matches!(check(&rx, &far, 77), Verdict::Reply(Body::Challenge { instance: 9, .. })));
    assert_eq!(rx.stats.dropped_ahead.load(Ordering::Relaxed), 1);
    // The real node's next packets pass.
    for _ in 0..3 {
        assert_eq!(deliver(&tx, &rx, 9, Body::Close { qpn: 5 }, 77).0, Verdict::Accept);
    }
}

/// A key holder pushes A's window ahead step by step (each step within
/// the bound), so that A's packets look like replays; A's next packet
/// is answered with a challenge, and A's answer re-admits it. Recorded
/// and forged answers reset nothing.
#[test]
fn a_pushed_window_is_reset_by_the_real_node_answering_a_challenge() {
    let (tx, rx) = (keyed(), keyed());
    admit(&tx, &rx, 9);
    let p = Packet { src: A, dst: B, instance: 9, body: Body::Discover };
    for step in 1..=20 {
        assert_eq!(check(&rx, &sealed_with_seq(KEY, &p, step * MAX_AHEAD), 77), Verdict::Accept);
    }
    let (v, _) = deliver(&tx, &rx, 9, Body::Close { qpn: 5 }, 77);
    let Verdict::Reply(Body::Challenge { instance: 9, nonce }) = v else { panic!("{v:?}") };
    assert_eq!(rx.stats.dropped_replayed.load(Ordering::Relaxed), 1);
    // More refused packets within the gap: no second challenge.
    assert_eq!(deliver(&tx, &rx, 9, Body::Close { qpn: 5 }, 77).0, Verdict::Drop);
    // A key holder who did not see the nonce cannot answer for A.
    let forged = sealed_with_seq(KEY, &Packet { body: Body::Response { nonce: [0x5A; NONCE_LEN] }, ..p }, 3);
    assert_eq!(check(&rx, &forged, 77), Verdict::Drop);
    assert_eq!(rx.stats.resyncs.load(Ordering::Relaxed), 0);
    // A answers (its `Challenge` from rx passes, it responds).
    let (v, answer) = deliver(&tx, &rx, 9, Body::Response { nonce }, 77);
    assert_eq!(v, Verdict::Admitted);
    assert_eq!(rx.stats.resyncs.load(Ordering::Relaxed), 1);
    assert_eq!(deliver(&tx, &rx, 9, Body::Close { qpn: 5 }, 77).0, Verdict::Accept, "A is back");
    // The answer replayed, and a key holder's answer with the used nonce, reset nothing.
    assert_eq!(check(&rx, &answer, 77), Verdict::Drop);
    let reused = sealed_with_seq(KEY, &Packet { body: Body::Response { nonce }, ..p }, 1);
    assert_eq!(check(&rx, &reused, 77), Verdict::Drop);
    assert_eq!(rx.stats.resyncs.load(Ordering::Relaxed), 1);
    assert_eq!(deliver(&tx, &rx, 9, Body::Close { qpn: 5 }, 77).0, Verdict::Accept);
}

#[test]
fn a_challenge_the_window_refuses_is_still_answered_at_most_once_per_gap() {
    let (tx, rx) = (keyed(), keyed());
    admit(&tx, &rx, 9);
    let p = Packet { src: A, dst: B, instance: 9, body: Body::Challenge { instance: 77, nonce: [3; NONCE_LEN] } };
    assert_eq!(check(&rx, &sealed_with_seq(KEY, &p, MAX_AHEAD), 77), Verdict::Reply(Body::Response { nonce: [3; 16] }));
    let old = sealed_with_seq(KEY, &p, 2);
    assert_eq!(check(&rx, &old, 77), Verdict::Reply(Body::Response { nonce: [3; NONCE_LEN] }), "refused, answered");
    assert_eq!(check(&rx, &old, 77), Verdict::Drop, "within the gap");
    // A refused answer or foreign challenge makes us send nothing.
    let foreign = sealed_with_seq(KEY, &Packet { body: Body::Challenge { instance: 5, nonce: [3; 16] }, ..p }, 2);
    let answer = sealed_with_seq(KEY, &Packet { body: Body::Response { nonce: [3; 16] }, ..p }, 2);
    std::thread::sleep(CHALLENGE_GAP);
    assert_eq!((check(&rx, &foreign, 77), check(&rx, &answer, 77)), (Verdict::Drop, Verdict::Drop));
}

#[test]
fn admitted_instances_pass_once_and_modified_packets_fail() {
    let (tx, rx) = (keyed(), keyed());
    admit(&tx, &rx, 9);
    let (v, buf) = deliver(&tx, &rx, 9, Body::Close { qpn: 5 }, 77);
    assert_eq!(v, Verdict::Accept);
    // A replay is dropped; the refusal is answered with a challenge to
    // the real node (which a replayer cannot answer).
    let v = check(&rx, &buf, 77);
    assert!(matches!(v, Verdict::Reply(Body::Challenge { instance: 9, .. })), "replay: {v:?}");
    assert_eq!(rx.stats.dropped_replayed.load(Ordering::Relaxed), 1);
    for i in 0..buf.len() {
        let mut m = buf.clone();
        m[i] ^= 0x40;
        if let Ok((p, seal)) = Packet::decode_any(&m) {
            assert_eq!(rx.check(&p, seal, &m, 77, Instant::now()), Verdict::Drop, "byte {i} flipped");
        }
    }
    assert!(rx.stats.dropped_unauthenticated.load(Ordering::Relaxed) > 10);
    // Another key is refused, and named as the problem.
    let other = Auth::new(Some(AuthKey::new(b"another key of 16+ bytes", "t").unwrap()));
    let (v, _) = deliver(&other, &rx, 9, Body::Close { qpn: 5 }, 77);
    assert_eq!(v, Verdict::Drop);
    assert_eq!(rx.problem_with(A, rx.epoch), Some(AuthProblem::WrongKey));
}

#[test]
fn old_instances_must_answer_a_challenge_and_retired_ones_never_return() {
    let (old, new, rx) = (keyed(), keyed(), keyed());
    admit(&old, &rx, 1);
    let (_, recorded) = deliver(&old, &rx, 1, Body::Leave { qpn: 3, handled: 0 }, 77);
    admit(&new, &rx, 2);
    assert_eq!(check(&rx, &recorded, 77), Verdict::Drop, "retired instance");
    // A stale response (another engine's nonce) admits nothing.
    let (v, _) = deliver(&new, &rx, 3, Body::Response { nonce: [7; NONCE_LEN] }, 77);
    assert_eq!(v, Verdict::Drop);
    // A fresh receiver (restarted) does not act on a recording: it challenges.
    let fresh = keyed();
    assert!(matches!(check(&fresh, &recorded, 77), Verdict::Reply(Body::Challenge { instance: 1, .. })));
    assert_eq!(check(&fresh, &recorded, 77), Verdict::Drop, "one challenge per gap");
    // A challenge for a previous instance of ours is not answered.
    let (v, _) = deliver(&new, &fresh, 2, Body::Challenge { instance: 5, nonce: [1; NONCE_LEN] }, 77);
    assert_eq!(v, Verdict::Drop);
}

/// A probe is checked by its MAC alone and leaves no state behind: no
/// peer, no problem, no sequence number recorded; the same probe passes again.
#[test]
fn a_probe_is_checked_without_state() {
    let (k, other, plain) =
        (keyed(), Auth::new(Some(AuthKey::new(b"another key of 16+ bytes", "t").unwrap())), Auth::new(None));
    let probe = Packet { src: A, dst: crate::con::proto::ANY, instance: 3, body: Body::Discover };
    let seal = |a: &Auth| {
        let mut b = Vec::new();
        a.encode(&probe, &mut b);
        let s = Packet::decode_any(&b).unwrap().1;
        (b, s)
    };
    let (good, good_seal) = seal(&keyed());
    for _ in 0..3 {
        assert!(k.check_probe(good_seal, &good), "the same probe passes again");
    }
    let (bad, bad_seal) = seal(&other);
    let (unsealed, none) = seal(&plain);
    assert!(!k.check_probe(bad_seal, &bad) && !k.check_probe(none, &unsealed));
    assert!(plain.check_probe(none, &unsealed) && !plain.check_probe(good_seal, &good));
    assert_eq!(k.stats.dropped_unauthenticated.load(Ordering::Relaxed), 2);
    assert!(lock(&k.peers).is_empty() && lock(&k.problems).is_empty() && lock(&k.last_seq).is_empty());
}

#[test]
fn keyed_and_unkeyed_nodes_name_the_problem() {
    let (k, plain) = (keyed(), Auth::new(None));
    let t0 = Instant::now();
    assert_eq!(deliver(&plain, &k, 1, Body::Discover, 2).0, Verdict::Drop);
    assert_eq!(k.problem_with(A, t0), Some(AuthProblem::PeerHasNoAuth));
    assert_eq!(deliver(&k, &plain, 1, Body::Discover, 2).0, Verdict::Drop);
    assert_eq!(plain.problem_with(A, t0), Some(AuthProblem::PeerRequiresAuth));
    assert_eq!(plain.stats.dropped_unauthenticated.load(Ordering::Relaxed), 1);
    assert_eq!(deliver(&plain, &plain, 1, Body::Discover, 2).0, Verdict::Accept);
}
