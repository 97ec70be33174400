//! Peers on another fabric instance: an exchange whose queue pair is on
//! another sim network (another process: its sim addresses and QPNs repeat
//! ours) or on the other kind of fabric (sim against an RDMA device) names a
//! queue pair we cannot reach. Connecting to it would reach one of our own
//! (on sim) or time out; instead both sides refuse: the receiver of such an
//! exchange answers `WrongFabric`, and either side fails its connects to that
//! node at once with [`ConError::ForeignFabric`] until the node restarts
//! (a packet with a new instance id) or is removed, and for at most
//! [`FOREIGN_MEMORY`] discovery intervals (10 s at the defaults): then the
//! next connect asks again. A forged refusal (without a key, or from a key
//! holder who can send from the node's address) thus makes connects fail
//! for a while, not until the node restarts.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::close::CloseKind;
use super::{ConManager, JobState};
use crate::con::connection::ConState;
use crate::con::error::ConError;
use crate::con::node::NodeId;
use crate::con::proto::Body;
use crate::fabric::{foreign_reason, Fabric};
use crate::util::lock;

/// A refusal is believed for this many discovery intervals.
pub(super) const FOREIGN_MEMORY: u32 = 10;

/// Nodes known to be on another fabric instance: node → (its instance, its
/// sim network, until when this is believed).
#[derive(Debug, Default)]
pub(super) struct ForeignPeers(Mutex<HashMap<NodeId, (u32, u64, Instant)>>);

impl ForeignPeers {
    /// Records `node` for `memory`; true if this is news (log it once).
    fn record(&self, node: NodeId, instance: u32, sim_network: u64, memory: Duration) -> bool {
        let old = lock(&self.0).insert(node, (instance, sim_network, Instant::now() + memory));
        old.is_none_or(|e| (e.0, e.1) != (instance, sim_network))
    }
    /// The sim network `node` was last seen on, if it is a foreign one (and
    /// that was recently enough to still believe it).
    pub(super) fn get(&self, node: NodeId) -> Option<u64> {
        lock(&self.0).get(&node).filter(|e| Instant::now() < e.2).map(|e| e.1)
    }
    /// Forgets `node` (removed from the node table).
    pub(super) fn forget(&self, node: NodeId) {
        lock(&self.0).remove(&node);
    }
    /// Forgets `node` if `instance` is not the one recorded: it restarted
    /// and may be on another fabric now.
    pub(super) fn forget_restarted(&self, node: NodeId, instance: u32) {
        let mut m = lock(&self.0);
        if m.get(&node).is_some_and(|e| e.0 != instance) {
            m.remove(&node);
        }
    }
}

impl<F: Fabric> ConManager<F> {
    /// This node's sim network (0 on an RDMA device).
    pub(super) fn sim_network(&self) -> u64 {
        self.queues.fabric.info().sim_network
    }

    /// The error for a connect to `node`, if it is on another fabric instance.
    pub(super) fn foreign_error(&self, node: NodeId) -> Option<ConError> {
        let theirs = self.foreign.get(node)?;
        Some(ConError::ForeignFabric { node, ours: self.sim_network(), theirs })
    }

    /// `node` (instance `instance`) sent an exchange of a queue pair on sim
    /// network `theirs`, not ours: refuse it and tell the node why.
    pub(super) fn refuse_exchange(&self, node: NodeId, instance: u32, theirs: u64, st: &mut JobState<F>) {
        if self.drop_established(node, instance) {
            return;
        }
        self.note_foreign(node, instance, theirs, "its queue pair was refused");
        self.send(node, Body::WrongFabric { sim_network: self.sim_network() }, &mut st.buf);
        // A connection we may have started to it cannot come up: close it.
        self.close_conn(node, CloseKind::Abort, st);
        self.notify();
    }

    /// `node` refused our exchange: it is on sim network `theirs`.
    pub(super) fn handle_wrong_fabric(&self, node: NodeId, instance: u32, theirs: u64, st: &mut JobState<F>) {
        if theirs == self.sim_network() || self.drop_established(node, instance) {
            // Not a refusal we can have caused: stale or forged.
            self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.note_foreign(node, instance, theirs, "it refused our queue pair");
        self.close_conn(node, CloseKind::Abort, st);
        self.notify();
    }

    /// True (and counted stale) if our connection to this instance of `node`
    /// is established: a working connection is on one fabric, so a packet
    /// saying otherwise is stale or forged and must not tear it down.
    fn drop_established(&self, node: NodeId, instance: u32) -> bool {
        let t = self.table.read().unwrap_or_else(|p| p.into_inner());
        let up = t.get(&node).is_some_and(|c| c.state() == ConState::Established && c.peer_instance() == instance);
        if up {
            self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
        }
        up
    }

    fn note_foreign(&self, node: NodeId, instance: u32, theirs: u64, what: &str) {
        self.stats.foreign_fabric.fetch_add(1, Ordering::Relaxed);
        if self.foreign.record(node, instance, theirs, self.cfg.discovery_interval * FOREIGN_MEMORY) {
            let reason = foreign_reason(self.sim_network(), theirs);
            log::warn!("node {}: node {} {reason} ({what})", self.me, node.0);
        }
    }
}
