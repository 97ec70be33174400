//! Authentication of the control plane with an optional pre-shared key.
//!
//! With a key every packet is sealed: a sequence number of the sender's
//! instance and an HMAC-SHA256 over the whole packet (header, payload,
//! sequence number). A receiver drops packets whose MAC does not verify
//! (`dropped_unauthenticated`) and replays (`dropped_replayed`).
//!
//! Replay protection has three parts:
//! - Within one sender instance: a sliding window of the last
//!   [`WINDOW`] sequence numbers per peer; a number seen before, or older
//!   than the window, is a replay. A sender counts its sequence numbers per
//!   destination (from 1), so an honest number jumps ahead only by the
//!   packets to us that were lost; one more than [`MAX_AHEAD`] beyond the
//!   highest accepted is refused (`dropped_ahead`) and does not move the
//!   window: one packet of a key holder cannot push the window so far that
//!   the real node's packets look like replays.
//! - Re-synchronisation: the key is one group secret, so a key holder who
//!   can send from a node's address can still push that node's window ahead
//!   step by step (each step at most [`MAX_AHEAD`]), or a long silence can
//!   exceed the bound honestly. So a packet of the admitted instance that
//!   the window refuses is answered (at most every [`CHALLENGE_GAP`]) with a
//!   challenge carrying a random, single-use nonce; the answer, sealed with
//!   the key and sent from the node's address, must come back within
//!   [`RESYNC_LIFETIME`] and resets the window to the answer's sequence
//!   number. The nonce goes only to the node's table address, so whoever
//!   cannot receive there cannot answer it; a recorded answer is refused
//!   (the nonce is used up). A challenge that the window refuses is still
//!   answered (rate limited), so two nodes whose windows were both pushed
//!   re-synchronise each other.
//! - Across instances: a packet of an instance the receiver has not
//!   admitted yet could be a recording of a previous instance (the MAC is
//!   still valid: the key outlives instances), and acting on it would tear
//!   down the live connection as a "restart". So an unknown instance is
//!   admitted only after it answers a challenge: the receiver answers its
//!   packet with a nonce, and the instance must send it back sealed. A
//!   recorded packet cannot answer, so it stays unadmitted. We chose a
//!   challenge over a timestamp window because it needs no synchronised
//!   clocks and also holds right after the receiver itself restarted (when
//!   it remembers nothing). The nonce is stateless — an HMAC under a random
//!   per-engine secret of (node, instance, 30-second epoch) — so a flood of
//!   packets costs no memory, and a response is good for 30 to 60 seconds.
//!   Instances replaced by a newer one are remembered as retired
//!   ([`RETIRED`] per node) and never admitted again.
//!
//! Without a key nothing is sealed and every well-formed packet from the
//! node's table address is accepted, as before. A node with a key and one
//! without cannot talk: each drops the other's packets, logs why (rate
//! limited) and remembers it, so that `connect` fails with
//! [`AuthProblem`] instead of a bare timeout.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::counter::{CounterSlot, Part};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::auth_key::AuthKey;
use super::node::NodeId;
use super::proto::{Body, Packet, Seal, MAC_LEN, NONCE_LEN, VERSION_KEYED};
use crate::util::lock;

type HmacSha256 = Hmac<Sha256>;

/// Sequence numbers of one instance remembered behind the highest seen.
pub const WINDOW: u64 = 128;
/// How far a sequence number may be ahead of the highest accepted one of
/// its instance: sequence numbers count per destination, so an honest
/// sender jumps ahead only by the packets to us that were lost.
pub const MAX_AHEAD: u64 = 1024;
/// How long a re-synchronisation nonce may be answered.
pub const RESYNC_LIFETIME: Duration = Duration::from_secs(5);
/// Replaced instances remembered per node.
const RETIRED: usize = 16;
/// Lifetime of a challenge nonce's epoch (a nonce is good for this to twice this).
const NONCE_EPOCH: Duration = Duration::from_secs(30);
/// A challenge to the same (node, instance) at most this often.
const CHALLENGE_GAP: Duration = Duration::from_millis(20);
/// Warnings about one node at most this often.
const LOG_GAP: Duration = Duration::from_secs(10);

/// Why a node cannot be talked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthProblem {
    /// Its packets are sealed and this node has no key.
    PeerRequiresAuth,
    /// Its packets are not sealed and this node requires a key.
    PeerHasNoAuth,
    /// Its packets are sealed but do not verify with our key.
    WrongKey,
}

impl AuthProblem {
    /// The reason as a sentence fragment after "node N".
    pub fn describe(self) -> &'static str {
        match self {
            AuthProblem::PeerRequiresAuth => {
                "requires authentication (its packets are sealed with a key) and this node has no key \
                 (set auth_key_file or IBDXNET_AUTH_KEY)"
            }
            AuthProblem::PeerHasNoAuth => {
                "does not use authentication (its packets carry no MAC) and this node requires it (it has a key)"
            }
            AuthProblem::WrongKey => "sends packets that fail authentication (a different key, or forged)",
        }
    }
}

/// Counters of the authentication layer.
/// One cache-line slot each, in the order of [`AUTH_COUNTERS`].
#[repr(C)]
#[derive(Debug, Default)]
pub struct AuthStats {
    /// Packets whose MAC did not verify, unsealed packets at a node with a
    /// key, and sealed packets at a node without one.
    pub dropped_unauthenticated: CounterSlot,
    /// Sealed packets seen before (sequence window), of a retired instance,
    /// or answering a challenge that is stale or was never issued.
    pub dropped_replayed: CounterSlot,
    /// Sealed packets of an admitted instance whose sequence number is more
    /// than [`MAX_AHEAD`] beyond the highest accepted (refused; the window
    /// does not move).
    pub dropped_ahead: CounterSlot,
    /// Sealed packets of an instance not admitted yet: dropped and answered
    /// with a challenge (the peer repeats them once admitted).
    pub dropped_unverified: CounterSlot,
    /// Challenges sent.
    pub challenges_sent: CounterSlot,
    /// Instances admitted after answering a challenge.
    pub instances_admitted: CounterSlot,
    /// Windows of admitted instances reset by a correct answer to a
    /// re-synchronisation challenge.
    pub resyncs: CounterSlot,
}

/// One counter of [`AuthStats`].
pub type AuthCounter = crate::sys::counter::CounterDesc<AuthStats>;

use crate::sys::counter::counter_desc as auth_counter;

/// Every counter of [`AuthStats`], in the order of its fields (the one
/// place their names are spelled).
#[rustfmt::skip]
pub static AUTH_COUNTERS: &[AuthCounter] = &[
    auth_counter!(dropped_unauthenticated, dropped_unauthenticated, "packets whose MAC did not verify, or sealed/unsealed against our key setting"),
    auth_counter!(dropped_replayed, dropped_replayed, "sealed packets seen before, of a retired instance, or answering a stale challenge"),
    auth_counter!(dropped_ahead, dropped_ahead, "sealed packets too far ahead of the sequence window"),
    auth_counter!(dropped_unverified, dropped_unverified, "sealed packets of an instance not admitted yet (answered with a challenge)"),
    auth_counter!(auth_challenges, challenges_sent, "challenges sent"),
    auth_counter!(auth_instances_admitted, instances_admitted, "instances admitted after answering a challenge"),
    auth_counter!(auth_resyncs, resyncs, "sequence windows reset by a correct re-synchronisation answer"),
];

/// What to do with a received packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Hand it to the connection manager.
    Accept,
    /// Dropped (and counted).
    Drop,
    /// Dropped; send this body back to the sender (a challenge or a response).
    Reply(Body),
    /// A response admitted the sender's instance.
    Admitted,
}

/// What the window says about a sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seq {
    /// Not seen, in the window or ahead of it by at most [`MAX_AHEAD`]: recorded.
    Fresh,
    /// Seen before, older than the window, or 0.
    Replayed,
    /// More than [`MAX_AHEAD`] beyond the highest accepted: not recorded.
    TooFarAhead,
}

/// Sliding window over one instance's sequence numbers.
#[derive(Debug, Default, Clone)]
struct ReplayWindow {
    highest: u64,
    /// Bit i: `highest - i` was seen.
    seen: u128,
}

impl ReplayWindow {
    /// Records `seq` if it is fresh (see [`Seq`]).
    fn accept(&mut self, seq: u64) -> Seq {
        if seq == 0 {
            return Seq::Replayed;
        }
        if seq > self.highest {
            let shift = seq - self.highest;
            if shift > MAX_AHEAD {
                return Seq::TooFarAhead;
            }
            self.seen = if shift >= WINDOW { 0 } else { self.seen << shift };
            self.seen |= 1;
            self.highest = seq;
            return Seq::Fresh;
        }
        let back = self.highest - seq;
        if back >= WINDOW || self.seen & (1 << back) != 0 {
            return Seq::Replayed;
        }
        self.seen |= 1 << back;
        Seq::Fresh
    }

    /// `seq` is the sequence number of a correct answer to a fresh
    /// challenge: the sender's current one. Recorded as usual if the window
    /// allows it; otherwise (the window was pushed past the sender, or the
    /// sender jumped beyond the bound) everything up to `seq` counts as seen
    /// from now on. Numbers above `seq` the sender has not used yet.
    fn resync(&mut self, seq: u64) {
        if self.accept(seq) != Seq::Fresh {
            *self = ReplayWindow { highest: seq, seen: u128::MAX };
        }
    }
}

/// A re-synchronisation challenge to an admitted instance.
#[derive(Debug, Clone, Copy)]
struct Resync {
    nonce: [u8; NONCE_LEN],
    /// When the nonce was made (it is answerable for [`RESYNC_LIFETIME`]).
    issued: Instant,
    /// When it was last sent.
    sent: Instant,
    /// Answered: used up.
    answered: bool,
}

/// Compares two nonces in time independent of where they differ.
fn same_nonce(a: &[u8; NONCE_LEN], b: &[u8; NONCE_LEN]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[derive(Debug, Default)]
struct Peer {
    /// The admitted instance (0: none) and its window.
    instance: u32,
    window: ReplayWindow,
    retired: VecDeque<u32>,
    /// (instance, when) of recent challenges, for [`CHALLENGE_GAP`].
    challenged: Vec<(u32, Instant)>,
    /// The re-synchronisation challenge to the admitted instance, if any.
    resync: Option<Resync>,
    /// When a challenge that the window refused was last answered.
    refused_challenge_answered: Option<Instant>,
}

/// A problem with a node's packets, when it was last seen and last logged.
type ProblemSeen = (AuthProblem, Instant, Option<Instant>);

/// The authentication state of one connection manager.
pub struct Auth {
    key: Option<AuthKey>,
    /// Secret of the stateless challenge nonces (random per engine).
    nonce_secret: [u8; 32],
    epoch: Instant,
    /// Per destination: the last sequence number sealed.
    last_seq: Mutex<HashMap<NodeId, u64>>,
    peers: Mutex<HashMap<NodeId, Peer>>,
    /// Per node: the last problem seen, when, and when it was last logged.
    problems: Mutex<HashMap<NodeId, ProblemSeen>>,
    /// Counters (in an engine: slots of its counters table).
    pub stats: Part<AuthStats>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Auth(keyed: {})", self.key.is_some())
    }
}

fn mac_of(key: &[u8], data: &[u8]) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(data);
    m
}

impl Auth {
    /// Authentication with `key`, or none.
    pub fn new(key: Option<AuthKey>) -> Auth {
        Auth::with_stats(key, Part::default())
    }

    /// As [`Auth::new`], counting in `stats`.
    pub fn with_stats(key: Option<AuthKey>, stats: Part<AuthStats>) -> Auth {
        let mut nonce_secret = [0u8; 32];
        crate::util::random_bytes(&mut nonce_secret);
        Auth {
            key,
            nonce_secret,
            epoch: Instant::now(),
            last_seq: Mutex::new(HashMap::new()),
            peers: Mutex::new(HashMap::new()),
            problems: Mutex::new(HashMap::new()),
            stats,
        }
    }

    /// True if packets are sealed.
    pub fn keyed(&self) -> bool {
        self.key.is_some()
    }

    /// Serialises `p` into `out`, sealed if there is a key (sequence
    /// numbers count per destination, from 1).
    pub fn encode(&self, p: &Packet, out: &mut Vec<u8>) {
        p.encode(out);
        if let Some(key) = &self.key {
            out[4] = VERSION_KEYED;
            let seq = {
                let mut last = lock(&self.last_seq);
                let s = last.entry(p.dst).or_insert(0);
                *s += 1;
                *s
            };
            out.extend_from_slice(&seq.to_be_bytes());
            let tag = mac_of(key.bytes(), out).finalize().into_bytes();
            out.extend_from_slice(&tag);
        }
    }

    /// The nonce for `node`'s instance `instance` in nonce epoch `epoch`.
    fn nonce(&self, node: NodeId, instance: u32, epoch: u64) -> [u8; NONCE_LEN] {
        let mut m = mac_of(&self.nonce_secret, b"ibdxnet challenge");
        m.update(&node.0.to_be_bytes());
        m.update(&instance.to_be_bytes());
        m.update(&epoch.to_be_bytes());
        let tag = m.finalize().into_bytes();
        tag[..NONCE_LEN].try_into().expect("SHA-256 gives 32 bytes")
    }

    fn nonce_epoch(&self, now: Instant) -> u64 {
        (now - self.epoch).as_secs() / NONCE_EPOCH.as_secs()
    }

    /// Checks a probe (a `Discover` to any node) without touching any
    /// state: with a key, its MAC must verify; without one, it must not be
    /// sealed. A probe takes no part in sequence windows or instance
    /// admission (it can only be answered), so a replayed one costs an
    /// answer and nothing else. A refused probe counts as
    /// `dropped_unauthenticated`; no problem is recorded (the sender may be
    /// anybody).
    pub fn check_probe(&self, seal: Option<Seal>, data: &[u8]) -> bool {
        let ok = match (&self.key, seal) {
            (None, None) => true,
            (Some(key), Some(seal)) => {
                data.len() >= MAC_LEN && {
                    let signed = &data[..data.len() - MAC_LEN];
                    mac_of(key.bytes(), signed).verify_slice(&seal.mac).is_ok()
                }
            }
            _ => false,
        };
        if !ok {
            self.stats.dropped_unauthenticated.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Decides about a well-formed packet from `p.src`'s table address
    /// (`data` is the whole datagram, `seal` its seal if keyed).
    /// `my_instance` is this engine's instance id.
    pub fn check(&self, p: &Packet, seal: Option<Seal>, data: &[u8], my_instance: u32, now: Instant) -> Verdict {
        let count = |c: &AtomicU64| {
            c.fetch_add(1, Ordering::Relaxed);
            Verdict::Drop
        };
        let (key, seal) = match (&self.key, seal) {
            (None, None) => return Verdict::Accept,
            (None, Some(_)) => {
                self.problem(p.src, AuthProblem::PeerRequiresAuth, now);
                return count(&self.stats.dropped_unauthenticated);
            }
            (Some(_), None) => {
                self.problem(p.src, AuthProblem::PeerHasNoAuth, now);
                return count(&self.stats.dropped_unauthenticated);
            }
            (Some(k), Some(s)) => (k, s),
        };
        // Constant-time comparison (`verify_slice`).
        let signed = &data[..data.len() - MAC_LEN];
        if mac_of(key.bytes(), signed).verify_slice(&seal.mac).is_err() {
            self.problem(p.src, AuthProblem::WrongKey, now);
            return count(&self.stats.dropped_unauthenticated);
        }
        lock(&self.problems).remove(&p.src);
        let mut peers = lock(&self.peers);
        let peer = peers.entry(p.src).or_default();
        if peer.retired.contains(&p.instance) {
            return count(&self.stats.dropped_replayed);
        }
        let admitted = peer.instance == p.instance && p.instance != 0;
        if admitted {
            // The answer to our re-synchronisation challenge is taken
            // whatever the window says: the window may be what went wrong.
            if let (Body::Response { nonce }, Some(r)) = (p.body, peer.resync.as_mut()) {
                if !r.answered && now - r.issued < RESYNC_LIFETIME && same_nonce(&r.nonce, &nonce) {
                    r.answered = true;
                    peer.window.resync(seal.seq);
                    self.stats.resyncs.fetch_add(1, Ordering::Relaxed);
                    return Verdict::Admitted;
                }
            }
            match peer.window.accept(seal.seq) {
                Seq::Fresh => {}
                refused => return self.refused(peer, p, refused, my_instance, now),
            }
        }
        match p.body {
            // Answering a challenge is harmless whoever replays it: the
            // response is only good for the instance the nonce was made for.
            Body::Challenge { instance, nonce } => {
                if instance != my_instance {
                    return count(&self.stats.dropped_replayed);
                }
                Verdict::Reply(Body::Response { nonce })
            }
            Body::Response { nonce } => {
                if admitted && peer.resync.is_some_and(|r| r.answered && same_nonce(&r.nonce, &nonce)) {
                    // A second answer to the same challenge (the window took it: fresh).
                    return Verdict::Admitted;
                }
                let epoch = self.nonce_epoch(now);
                let fresh = [epoch, epoch.wrapping_sub(1)].iter().any(|e| self.nonce(p.src, p.instance, *e) == nonce);
                if !fresh {
                    return count(&self.stats.dropped_replayed);
                }
                if !admitted {
                    if peer.instance != 0 {
                        if peer.retired.len() == RETIRED {
                            peer.retired.pop_front();
                        }
                        peer.retired.push_back(peer.instance);
                    }
                    peer.instance = p.instance;
                    // Everything before the response counts as seen: the
                    // packets dropped unverified could otherwise be replayed
                    // now (the peer repeats what matters after responding).
                    peer.window = ReplayWindow { highest: seal.seq, seen: u128::MAX };
                    peer.challenged.retain(|c| c.0 != p.instance);
                    peer.resync = None;
                    self.stats.instances_admitted.fetch_add(1, Ordering::Relaxed);
                }
                Verdict::Admitted
            }
            _ if admitted => Verdict::Accept,
            _ => {
                self.stats.dropped_unverified.fetch_add(1, Ordering::Relaxed);
                peer.challenged.retain(|c| now - c.1 < CHALLENGE_GAP);
                if peer.challenged.iter().any(|c| c.0 == p.instance) || peer.challenged.len() >= 8 {
                    return Verdict::Drop;
                }
                peer.challenged.push((p.instance, now));
                self.stats.challenges_sent.fetch_add(1, Ordering::Relaxed);
                let nonce = self.nonce(p.src, p.instance, self.nonce_epoch(now));
                Verdict::Reply(Body::Challenge { instance: p.instance, nonce })
            }
        }
    }

    /// A packet of the admitted instance that its window refused: counted,
    /// and answered with a re-synchronisation challenge (at most every
    /// [`CHALLENGE_GAP`]): if the real node sent it, its window here is
    /// behind or ahead of it, and its answer resets the window. A refused
    /// challenge for our instance is still answered (rate limited too): the
    /// peer's window for us may be the one that was pushed.
    fn refused(&self, peer: &mut Peer, p: &Packet, why: Seq, my_instance: u32, now: Instant) -> Verdict {
        let counter = if why == Seq::TooFarAhead { &self.stats.dropped_ahead } else { &self.stats.dropped_replayed };
        counter.fetch_add(1, Ordering::Relaxed);
        let due = |last: Option<Instant>| last.is_none_or(|t| now - t >= CHALLENGE_GAP);
        match p.body {
            Body::Challenge { instance, nonce } if instance == my_instance => {
                if !due(peer.refused_challenge_answered) {
                    return Verdict::Drop;
                }
                peer.refused_challenge_answered = Some(now);
                Verdict::Reply(Body::Response { nonce })
            }
            // Answers and foreign challenges are not the peer asking for
            // anything: a recording of one must not make us send.
            Body::Challenge { .. } | Body::Response { .. } => Verdict::Drop,
            _ => {
                if !due(peer.resync.map(|r| r.sent)) {
                    return Verdict::Drop;
                }
                let r = match peer.resync {
                    Some(r) if !r.answered && now - r.issued < RESYNC_LIFETIME => Resync { sent: now, ..r },
                    _ => {
                        let mut nonce = [0u8; NONCE_LEN];
                        crate::util::random_bytes(&mut nonce);
                        Resync { nonce, issued: now, sent: now, answered: false }
                    }
                };
                peer.resync = Some(r);
                self.stats.challenges_sent.fetch_add(1, Ordering::Relaxed);
                Verdict::Reply(Body::Challenge { instance: p.instance, nonce: r.nonce })
            }
        }
    }

    /// Records (and logs, rate limited) why `node`'s packet was refused.
    fn problem(&self, node: NodeId, what: AuthProblem, now: Instant) {
        let mut problems = lock(&self.problems);
        let e = problems.entry(node).or_insert((what, now, None));
        e.0 = what;
        e.1 = now;
        if e.2.is_none_or(|t| now - t >= LOG_GAP) {
            e.2 = Some(now);
            log::warn!("control packet from node {node} dropped: node {node} {}", what.describe());
        }
    }

    /// The problem seen with `node` since `since`, if any.
    pub fn problem_with(&self, node: NodeId, since: Instant) -> Option<AuthProblem> {
        lock(&self.problems).get(&node).filter(|e| e.1 >= since).map(|e| e.0)
    }

    /// The counters by name, for the statistics map.
    pub fn stats_map(&self) -> Vec<(&'static str, u64)> {
        AUTH_COUNTERS.iter().map(|c| (c.name, (c.get)(&self.stats).load(Ordering::Relaxed))).collect()
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            check(&rx, &sealed_with_seq(KEY, &p, MAX_AHEAD), 77),
            Verdict::Reply(Body::Response { nonce: [3; 16] })
        );
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
}
