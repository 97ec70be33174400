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

mod window;
use window::{ReplayWindow, Seq};

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
mod tests;
