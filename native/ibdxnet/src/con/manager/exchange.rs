//! The exchange state machine: creating a connection (evicting idle ones
//! at the limit), exchanging queue pair endpoints until both sides are
//! established, retransmitting while they are not, and giving up.
//!
//! A connection goes `Pending` (queue pair created) → `Connected` (ours is
//! connected to the endpoint the peer announced) → `Established` (the peer
//! says it is connected to ours, `peer_qpn` in its packet). Packets say
//! whether their sender is established, so answers go on until both are.
//! A peer announcing a new instance id (restart) or a fresh queue pair
//! replaces the stale connection.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::close::CloseKind;
use super::{ConManager, JobState};
use crate::con::connection::{ConState, Connection, SendRing};
use crate::con::node::NodeId;
use crate::con::proto::Body;
use crate::fabric::{Fabric, FabricError, QpEndpoint, QueuePair};

/// Only connections idle this long in both directions are evicted at the
/// limit: data published for a connection in use but not yet posted, or data
/// the peer is sending, would go down with it.
const EVICT_IDLE: Duration = Duration::from_millis(20);

/// A connection not used in either direction since it came up is evicted
/// only this long after: the caller it was made for, at either end, may not
/// have run yet. With [`EVICT_IDLE`] alone, a node at its limit evicted
/// connections its peers' callers had not taken yet (issue 22: in the
/// 64-node churn soak with the JVM on one core, before the fix of late
/// exchanges, a peer's `Close` ended 43 established connections in a minute
/// while a caller still waited for them). With this grace that soak took 0.69 of the time with 0.67 of the closes (one interleaved
/// pair, `bench/results/2026-11-26-churn-64.txt`). A node may hold more than
/// its limit meanwhile, as while connections come up.
const FIRST_USE_GRACE: Duration = Duration::from_secs(1);

/// What a peer's `Exchange` says.
#[derive(Debug, Clone, Copy)]
pub(super) struct Exchange {
    /// The peer's instance id.
    pub(super) instance: u32,
    /// The peer's queue pair.
    pub(super) remote: QpEndpoint,
    /// Our queue pair the peer's is connected to (0: none yet; a peer that
    /// wants a new connection sends 0).
    pub(super) peer_qpn: u32,
    /// The peer considers the connection established.
    pub(super) peer_established: bool,
    /// The peer's flow-control unit (checked by the parser): we confirm its bytes in it.
    pub(super) flow_unit: u64,
}

impl<F: Fabric> ConManager<F> {
    /// True if the connection has been idle long enough to be evicted:
    /// [`EVICT_IDLE`] since its last use in either direction, or
    /// [`FIRST_USE_GRACE`] if it was not used since it came up.
    fn idle_enough(&self, c: &Connection<F>) -> bool {
        let received =
            self.epoch + Duration::from_millis(self.last_received_ms[usize::from(c.node().0)].load(Ordering::Relaxed));
        let last = c.last_used().max(received);
        let used = c.touched_since_established() || c.established_at().is_some_and(|e| received > e);
        last.elapsed() >= if used { EVICT_IDLE } else { FIRST_USE_GRACE }
    }

    /// Creates a pending connection (evicting the least recently used
    /// established ones at the limit) and puts it into the table.
    ///
    /// Connections still being set up are never evicted: with more nodes
    /// talking at once than the limit allows, evicting them livelocked (each
    /// new exchange evicted another node's pending connection, which was
    /// re-requested and evicted the next). So the limit counts established
    /// connections; the ones coming up may exceed it until they are used.
    pub(super) fn create(&self, node: NodeId, st: &mut JobState<F>) -> Option<Arc<Connection<F>>> {
        while self.cfg.evict_at_limit && self.connection_count() >= self.cfg.max_connections as usize {
            let lru = {
                let t = self.table.read().unwrap_or_else(|p| p.into_inner());
                t.values()
                    .filter(|c| {
                        c.state() == ConState::Established && self.idle_enough(c) && !self.has_waiters(c.node())
                    })
                    .min_by_key(|c| c.last_used())
                    .map(|c| c.node())
            };
            let Some(victim) = lru else { break };
            // Routine under a connection limit (tens of thousands in a churn soak): debug, not info.
            log::debug!("node {}: connection limit {} reached, evicting {victim}", self.me, self.cfg.max_connections);
            self.close_conn(victim, CloseKind::Drain, st);
        }
        let q = &self.queues;
        let made = (|| -> Result<Arc<Connection<F>>, FabricError> {
            let qp = q.fabric.create_qp(&q.send_cq, &q.recv_cq, &q.srq, q.caps)?;
            let ring = SendRing::new(&q.fabric, self.cfg.send_ring_size)?;
            Ok(Arc::new(Connection::new(node, qp, ring, self.state_changes.clone())))
        })();
        match made {
            Ok(c) => {
                c.touch();
                self.qpns.open(c.qp().qp_num(), node);
                self.table.write().unwrap_or_else(|p| p.into_inner()).insert(node, c.clone());
                st.pending_since.insert(node, Instant::now());
                self.stats.created.fetch_add(1, Ordering::Relaxed);
                Some(c)
            }
            Err(e) => {
                log::error!("node {}: cannot create a connection to {node}: {e}", self.me);
                None
            }
        }
    }

    /// Announces our queue pair of `c` (and whether we are established).
    pub(super) fn send_exchange(&self, c: &Connection<F>, st: &mut JobState<F>) {
        st.last_exchange.insert(c.node(), Instant::now());
        let established = c.state() == ConState::Established;
        let body = Body::Exchange {
            endpoint: c.endpoint(),
            peer_qpn: c.peer_qpn(),
            established,
            flow_unit: self.cfg.flow_unit,
        };
        self.send(c.node(), body, &mut st.buf);
    }

    /// Repeats the packet a challenge from `node` may have stopped: the
    /// exchange of a connection coming up, or discovery.
    pub(super) fn resend_to(&self, node: NodeId, st: &mut JobState<F>) {
        let unfinished = self.table.read().unwrap_or_else(|p| p.into_inner()).get(&node).cloned();
        match unfinished {
            Some(c) if matches!(c.state(), ConState::Pending | ConState::Connected) => self.send_exchange(&c, st),
            _ if !self.is_discovered(node) => self.send(node, Body::Discover, &mut st.buf),
            _ => {}
        }
    }

    /// The peer's `Exchange`.
    pub(super) fn handle_exchange(&self, node: NodeId, x: Exchange, st: &mut JobState<F>) {
        let Exchange { instance, remote, peer_qpn, peer_established, flow_unit } = x;
        self.finish_closes_of_old_instances(node, instance, st);
        let current = self.table.read().unwrap_or_else(|p| p.into_inner()).get(&node).cloned();
        if current.is_none() && peer_qpn != 0 {
            // About a queue pair of ours that is closed or closing (e.g. the
            // last answer of its set-up, overtaken by the close): building a
            // new connection on it would connect to the peer's closing one.
            // A peer that wants a new connection sends peer_qpn 0.
            self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
            self.refuse_dead_pairing(node, peer_qpn, st);
            return;
        }
        if let Some(c) = current.as_ref().filter(|c| c.state() == ConState::Pending) {
            if peer_qpn != 0 && peer_qpn != c.qp().qp_num() {
                // Our fresh queue pair, and the peer's queue pair is connected to
                // an older one of ours (its exchange arrived late or was retried
                // after that pairing ended). Connected to it, ours would wait for
                // an answer naming it that never comes, the peer's `Close` of it
                // would close ours, and the caller's next fresh queue pair met the
                // next late exchange: under churn between two nodes connecting to
                // each other on a loaded host, neither connect came up within its
                // timeout (issue 22). Tell the peer that pairing is dead; ours goes
                // on announcing itself (peer_qpn 0) until the peer answers it.
                self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
                self.refuse_dead_pairing(node, peer_qpn, st);
                return;
            }
        }
        if let Some(c) = &current {
            let restarted = c.peer_instance() != 0 && c.peer_instance() != instance;
            let other_qp = c.state() != ConState::Pending && c.peer_qpn() != remote.qpn;
            if other_qp && !restarted && peer_qpn != 0 {
                // The peer's queue pair is already connected to one of ours: an
                // exchange of an abandoned queue pair (delayed or retransmitted), or
                // both sides replaced at once. Replacing on it chased the peer
                // forever under connection churn (each replacement answered with a
                // new queue pair); only a fresh queue pair (peer_qpn 0) replaces.
                self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
                if peer_qpn != c.qp().qp_num() {
                    self.refuse_dead_pairing(node, peer_qpn, st);
                }
                if peer_qpn == c.qp().qp_num() {
                    // Crossed: its new queue pair points at ours, ours at its old one.
                    // Neither can be re-targeted: drop ours; the next use starts fresh.
                    log::debug!("node {}: crossed queue pairs with {node} — closing ours", self.me);
                    self.close_conn(node, CloseKind::Replaced, st);
                }
                return;
            }
            if restarted || other_qp {
                log::info!(
                    "node {}: peer {node} {} — replacing the stale connection",
                    self.me,
                    if restarted { "restarted" } else { "has a new queue pair" }
                );
                // A fresh queue pair from the same instance: it closed ours in order
                // (its close got lost). A restart lost whatever was in flight.
                self.close_conn(node, if restarted { CloseKind::Abort } else { CloseKind::Replaced }, st);
            }
        }
        // Bind first: a read guard in the match scrutinee would live through
        // `create`, which takes the write lock.
        let existing = self.table.read().unwrap_or_else(|p| p.into_inner()).get(&node).cloned();
        let c = match existing {
            Some(c) => c,
            None => match self.create(node, st) {
                Some(c) => c,
                None => return,
            },
        };
        if c.state() == ConState::Pending {
            if let Err(e) = c.connect(&remote, instance, flow_unit) {
                log::error!("node {}: connecting the queue pair to {node} failed: {e}", self.me);
                self.close_conn(node, CloseKind::Abort, st);
                return;
            }
        }
        let was_established = c.state() == ConState::Established;
        if peer_qpn == c.qp().qp_num() && c.state() == ConState::Connected {
            // Its idle time counts from here: a connection that took longer
            // than EVICT_IDLE to come up was evicted before its first use
            // (under churn on a loaded host, connects then never succeeded).
            c.set_established();
            st.pending_since.remove(&node);
            st.last_exchange.remove(&node);
            log::debug!(
                "node {}: connection to {node} established (qpn {} ↔ {})",
                self.me,
                c.qp().qp_num(),
                remote.qpn
            );
            self.notify();
        }
        // Answer until both sides know both are connected: the peer is not
        // connected to our queue pair, we just became established, or the
        // peer does not know yet that we are (our last answer was lost).
        if peer_qpn != c.qp().qp_num() || !was_established || !peer_established {
            self.send_exchange(&c, st);
        }
    }

    /// The peer's queue pair is connected to our queue pair `ours`, which is
    /// not the node's connection (closed, or closing): tell the peer with a
    /// `Close` of `ours`, which closes its queue pair if it is still the
    /// node's (connected to `ours`). Without it, a peer whose `Close` from us
    /// got lost (a replaced queue pair sends it once) kept a connection
    /// that never came up: its connects waited out their timeout while we
    /// dropped its retried exchanges as stale.
    fn refuse_dead_pairing(&self, node: NodeId, ours: u32, st: &mut JobState<F>) {
        self.send(node, Body::Close { qpn: ours }, &mut st.buf);
    }

    /// When [`ConManager::retry_exchanges`] next has something to do: the
    /// earliest retransmission or give-up of a connection not yet established.
    pub(super) fn next_exchange_due(&self, st: &JobState<F>) -> Option<Instant> {
        let t = self.table.read().unwrap_or_else(|p| p.into_inner());
        t.values()
            .filter(|c| matches!(c.state(), ConState::Pending | ConState::Connected))
            .filter_map(|c| {
                let node = c.node();
                let retry = st.last_exchange.get(&node).map(|l| *l + self.cfg.exchange_retry);
                let give_up = st.pending_since.get(&node).map(|p| *p + self.cfg.connect_timeout * 3);
                match (retry, give_up) {
                    (Some(r), Some(g)) => Some(r.min(g)),
                    (r, g) => r.or(g).or_else(|| Some(Instant::now())),
                }
            })
            .min()
    }

    /// Retransmits the exchanges of connections not yet established; gives
    /// up on those pending longer than three connect timeouts.
    pub(super) fn retry_exchanges(&self, now: Instant, st: &mut JobState<F>) {
        let unfinished: Vec<Arc<Connection<F>>> = self
            .table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|c| matches!(c.state(), ConState::Pending | ConState::Connected))
            .cloned()
            .collect();
        for c in unfinished {
            let node = c.node();
            if st.pending_since.get(&node).is_some_and(|t| now - *t > self.cfg.connect_timeout * 3) {
                log::warn!("node {}: connection to {node} not established, giving up", self.me);
                self.close_conn(node, CloseKind::Abort, st);
                continue;
            }
            if st.last_exchange.get(&node).is_none_or(|t| now - *t >= self.cfg.exchange_retry) {
                self.send_exchange(&c, st);
            }
        }
    }
}
