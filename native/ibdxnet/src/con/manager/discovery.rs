//! Discovery by address (protocol 7), the way upstream DXNet does it: the
//! user gives bare addresses ([`ConManager::add_address`]) and the node ids
//! are learnt from the answers.
//!
//! - The job thread probes every candidate address whose node is not
//!   discovered (none bound yet, or the bound node was lost) once per
//!   discovery interval, and at once when an address is added or its node
//!   removed: a `Discover` to [`ANY`].
//! - A probe is only ever answered (a `DiscoverAck` naming us, to the
//!   probe's source), rate limited by two token buckets without per-source
//!   state: [`KNOWN_RATE`] for sources that are candidates or in the node
//!   table, [`STRANGER_RATE`] for every other source. A probe creates no
//!   state anywhere. With a key, a probe must carry a valid MAC and come
//!   from a known address (a stranger could not answer the instance
//!   challenge anyway; answering it would only spend sequence numbers).
//!   A probe naming a node that the table has at another address is
//!   refused as spoofed (`dropped_spoofed`), with or without a key.
//! - An answer (`DiscoverAck` to us) from a candidate address, naming a
//!   node that is not in the node table, goes through authentication like
//!   every packet (window, instance challenge, answered at that address);
//!   once accepted it enters the node into the table at that address and is
//!   then handled as usual (`Discovered`). Only answers do: a probe, or any
//!   other packet from a candidate address naming an unknown node, enters
//!   nothing. An answer carrying our own id is refused (`dropped_own_id`);
//!   one naming a node that the table has at another address is refused as
//!   spoofed (`dropped_spoofed`, as before).
//! - One node per candidate address: an address answering with another id
//!   than the one bound to it replaces it (the old id is removed from the
//!   table and reported `Invalidated`; `discovery_replaced`).

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::job::Job;
use super::{ConManager, JobState};
use crate::con::auth::Verdict;
use crate::con::node::{NodeError, NodeId};
use crate::con::proto::{Body, Packet, Seal, ANY};
use crate::fabric::Fabric;
use crate::util::lock;

/// Probe answers per second (and burst) to candidate and node-table addresses.
pub const KNOWN_RATE: (f64, f64) = (1000.0, 100.0);
/// Probe answers per second (and burst) to every other address (without a key).
pub const STRANGER_RATE: (f64, f64) = (50.0, 10.0);
/// A probe answered from a candidate address is probed back at most this often.
const PROBE_BACK_GAP: Duration = Duration::from_millis(20);

/// One candidate address.
#[derive(Debug, Clone, Copy, Default)]
struct Candidate {
    /// The node that answered from it (in the node table at this address).
    bound: Option<NodeId>,
    /// When we last probed it.
    probed: Option<Instant>,
}

/// The candidate addresses (written by the user's thread, read by the job thread).
#[derive(Debug, Default)]
pub(super) struct Candidates {
    addrs: Mutex<HashMap<SocketAddr, Candidate>>,
    /// Probe now rather than at the next discovery round.
    probe_now: std::sync::atomic::AtomicBool,
}

/// A token bucket (job thread only, no per-source state).
#[derive(Debug)]
pub(super) struct Bucket {
    tokens: f64,
    last: Instant,
    rate: f64,
    burst: f64,
}

impl Bucket {
    fn new((rate, burst): (f64, f64)) -> Bucket {
        Bucket { tokens: burst, last: Instant::now(), rate, burst }
    }
    fn take(&mut self, now: Instant) -> bool {
        self.tokens = (self.tokens + (now - self.last).as_secs_f64() * self.rate).min(self.burst);
        self.last = now;
        let ok = self.tokens >= 1.0;
        if ok {
            self.tokens -= 1.0;
        }
        ok
    }
}

/// The job thread's discovery state: the answer buckets.
#[derive(Debug)]
pub(super) struct ProbeLimits {
    known: Bucket,
    stranger: Bucket,
}

impl Default for ProbeLimits {
    fn default() -> Self {
        ProbeLimits { known: Bucket::new(KNOWN_RATE), stranger: Bucket::new(STRANGER_RATE) }
    }
}

/// True if `addr` is an address of this host (the kernel routes to it
/// with itself as source) or a loopback address.
fn is_local_ip(addr: SocketAddr) -> bool {
    if addr.ip().is_loopback() {
        return true;
    }
    let any: SocketAddr = if addr.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
    UdpSocket::bind(any).and_then(|s| s.connect(addr).and_then(|_| s.local_addr())).is_ok_and(|l| l.ip() == addr.ip())
}

impl<F: Fabric> ConManager<F> {
    /// Adds a candidate address (`ip:port` of a node's connection manager,
    /// whose node id is not known): it is probed until a node answers from
    /// it, which is then entered into the node table (see
    /// [`crate::con::manager`]'s `discovery`). Adding it again does nothing.
    /// Our own listen address (also an address of this host at our port,
    /// when we listen on every interface) is ignored. An unspecified IP or
    /// port 0 is refused ([`NodeError::NoPeerAddress`]).
    pub fn add_address(&self, addr: SocketAddr) -> Result<(), NodeError> {
        if addr.ip().is_unspecified() || addr.port() == 0 {
            return Err(NodeError::NoPeerAddress(addr));
        }
        let local = self.local_addr;
        if addr == local || (addr.port() == local.port() && local.ip().is_unspecified() && is_local_ip(addr)) {
            log::debug!("node {}: candidate address {addr} is our own: ignored", self.me);
            return Ok(());
        }
        let fresh = {
            let mut c = lock(&self.candidates.addrs);
            let fresh = !c.contains_key(&addr);
            c.entry(addr).or_insert(Candidate { bound: self.nodes.id_at(addr), probed: None });
            fresh
        };
        if fresh {
            self.candidates.probe_now.store(true, Ordering::Release);
            self.kick();
        }
        Ok(())
    }

    /// The candidate addresses and the node bound to each.
    pub fn addresses(&self) -> Vec<(SocketAddr, Option<NodeId>)> {
        lock(&self.candidates.addrs).iter().map(|(a, c)| (*a, c.bound)).collect()
    }

    fn is_candidate(&self, addr: SocketAddr) -> bool {
        lock(&self.candidates.addrs).contains_key(&addr)
    }

    /// When the next discovery round (or probe) is due, given the last round:
    /// now if probes are asked for at once; none while every node in the
    /// table and every candidate address is discovered.
    pub(super) fn next_discovery_due(&self, now: Instant, last: Option<Instant>) -> Option<Instant> {
        match last {
            None => Some(now),
            Some(_) if self.candidates.probe_now.load(Ordering::Acquire) => Some(now),
            Some(t) => self.discovery_pending().then(|| t + self.cfg.discovery_interval),
        }
    }

    /// True if a discovery round has something to do: a node in the table
    /// or a candidate address not discovered.
    fn discovery_pending(&self) -> bool {
        let discovered = lock(&self.discovered);
        self.nodes.all().iter().any(|(n, _)| !discovered.contains(n))
            || lock(&self.candidates.addrs).values().any(|c| !c.bound.is_some_and(|n| discovered.contains(&n)))
    }

    /// Probes the candidates whose node is not discovered: every discovery
    /// round (`round`), or when asked to at once.
    pub(super) fn probe_candidates(&self, round: bool, st: &mut JobState<F>) {
        if !self.candidates.probe_now.swap(false, Ordering::AcqRel) && !round {
            return;
        }
        let now = Instant::now();
        let due: Vec<SocketAddr> = {
            let discovered = lock(&self.discovered);
            let mut c = lock(&self.candidates.addrs);
            c.iter_mut()
                .filter(|(_, c)| !c.bound.is_some_and(|n| discovered.contains(&n)))
                .map(|(a, c)| {
                    c.probed = Some(now);
                    *a
                })
                .collect()
        };
        for addr in due {
            self.send_probe(addr, &mut st.buf);
        }
    }

    fn send_probe(&self, addr: SocketAddr, buf: &mut Vec<u8>) {
        self.stats.discover_probes.fetch_add(1, Ordering::Relaxed);
        self.send_to(addr, ANY, Body::Discover, buf);
    }

    /// A probe (`Discover` to [`ANY`]) from `from`: answered if allowed,
    /// never remembered.
    pub(super) fn handle_probe(
        &self,
        p: &Packet,
        seal: Option<Seal>,
        data: &[u8],
        from: SocketAddr,
        st: &mut JobState<F>,
    ) {
        if p.src == self.me {
            self.stats.dropped_own_id.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // A node the table has speaks only from its address (as for every
        // packet): a replayed probe from elsewhere must not draw answers
        // that spend our sequence numbers for it where it cannot see them.
        if self.nodes.get(p.src).is_some_and(|a| a != from) {
            self.stats.dropped_spoofed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let candidate = lock(&self.candidates.addrs).get(&from).copied();
        let known = candidate.is_some() || self.nodes.has_address(from);
        if self.auth.keyed() && !known {
            self.stats.dropped_probe_foreign.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if !self.auth.check_probe(seal, data) {
            return;
        }
        let now = Instant::now();
        let bucket = if known { &mut st.probes.known } else { &mut st.probes.stranger };
        if !bucket.take(now) {
            self.stats.dropped_probe_rate.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.stats.discover_answered.fetch_add(1, Ordering::Relaxed);
        self.send_to(from, p.src, Body::DiscoverAck, &mut st.buf);
        // A candidate probing us is probably up: probe it back now (its
        // answer binds it) instead of at the next round.
        let back =
            candidate.is_some_and(|c| c.bound != Some(p.src) && c.probed.is_none_or(|t| now - t >= PROBE_BACK_GAP));
        if back {
            if let Some(c) = lock(&self.candidates.addrs).get_mut(&from) {
                c.probed = Some(now);
            }
            self.send_probe(from, &mut st.buf);
        }
    }

    /// A packet to us from candidate address `from`, naming a node that is
    /// not in the node table: only an answer to our probe can enter it, and
    /// only once authentication accepts it (challenges and their answers go
    /// to `from`). Returns the packet if it entered its node.
    pub(super) fn answer_from_candidate(
        &self,
        p: Packet,
        seal: Option<Seal>,
        data: &[u8],
        from: SocketAddr,
        st: &mut JobState<F>,
    ) -> Option<Packet> {
        if p.src == self.me {
            self.stats.dropped_own_id.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if !matches!(p.body, Body::DiscoverAck | Body::Challenge { .. } | Body::Response { .. }) {
            self.stats.dropped_foreign.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // Stateless first: a packet that does not verify records nothing
        // about the node id it names (anybody can name any id).
        if self.auth.keyed() && !self.auth.check_probe(seal, data) {
            return None;
        }
        match self.auth.check(&p, seal, data, self.instance, Instant::now()) {
            Verdict::Accept if p.body == Body::DiscoverAck => self.bind(p.src, from, st).then_some(p),
            Verdict::Accept | Verdict::Drop => None,
            Verdict::Reply(body) => {
                self.send_to(from, p.src, body, &mut st.buf);
                None
            }
            Verdict::Admitted => {
                // Its instance answered our challenge: its next answer binds it.
                self.send_probe(from, &mut st.buf);
                None
            }
        }
    }

    /// Enters `id` at candidate address `addr`, replacing the node bound there.
    fn bind(&self, id: NodeId, addr: SocketAddr, st: &mut JobState<F>) -> bool {
        let old = lock(&self.candidates.addrs).get(&addr).and_then(|c| c.bound);
        if let Some(old) = old.filter(|&o| o != id) {
            log::info!("node {}: {addr} now answers as node {id}, not {old}: {old} removed", self.me);
            self.stats.discovery_replaced.fetch_add(1, Ordering::Relaxed);
            if self.nodes.remove_at(old, addr) {
                self.handle_job(Job::NodeRemoved(old), st);
            }
        }
        if let Err(e) = self.nodes.add_unique(id, addr) {
            log::debug!("node {}: not entering node {id} at {addr}: {e}", self.me);
            return false;
        }
        if let Some(c) = lock(&self.candidates.addrs).get_mut(&addr) {
            c.bound = Some(id);
        }
        self.stats.discovered_by_address.fetch_add(1, Ordering::Relaxed);
        log::info!("node {}: discovered node {id} at {addr}", self.me);
        true
    }

    /// `node` left the node table: its candidate address is probed again.
    pub(super) fn unbind(&self, node: NodeId) {
        let mut any = false;
        for c in lock(&self.candidates.addrs).values_mut().filter(|c| c.bound == Some(node)) {
            c.bound = None;
            any = true;
        }
        if any {
            self.candidates.probe_now.store(true, Ordering::Release);
        }
    }

    /// True if `from` is a candidate address (and `p` is for us from a node
    /// not in the table): see [`ConManager::answer_from_candidate`].
    pub(super) fn for_discovery(&self, p: &Packet, from: SocketAddr) -> bool {
        p.dst == self.me && self.nodes.get(p.src).is_none() && self.is_candidate(from)
    }
}
