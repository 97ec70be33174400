//! The connection manager's counters ([`ConStats`]) and their names in the
//! engine's statistics map.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the connection manager.
#[derive(Debug, Default)]
pub struct ConStats {
    /// Packets received and accepted.
    pub packets_in: AtomicU64,
    /// Packets sent.
    pub packets_out: AtomicU64,
    /// Packets dropped as malformed (bad magic, version, type, lengths, fields).
    pub dropped_malformed: AtomicU64,
    /// Packets dropped because of an unknown source or a wrong destination.
    pub dropped_foreign: AtomicU64,
    /// Packets naming a known source node but not sent from that node's
    /// address in the node table (forged source, or a forged instance id).
    pub dropped_spoofed: AtomicU64,
    /// Close packets that match no current connection (wrong queue pair or
    /// instance id of the peer, e.g. late from a previous instance).
    pub dropped_stale: AtomicU64,
    /// Connections created.
    pub created: AtomicU64,
    /// Connections closed.
    pub closed: AtomicU64,
    /// Orderly closes completed by both sides' `Done` (nothing left in flight).
    pub closes_drained: AtomicU64,
    /// Orderly closes the peer did not complete within the connect timeout
    /// (taken down anyway; a loss shows as `Lost` or `Disconnected`).
    pub closes_timed_out: AtomicU64,
    /// Jobs that did not fit the job queue.
    pub jobs_dropped: AtomicU64,
    /// Exchanges refused, and refusals received, because the peer is on
    /// another fabric instance.
    pub foreign_fabric: AtomicU64,
    /// Probes (`Discover` to any node) sent to candidate addresses.
    pub discover_probes: AtomicU64,
    /// Probes answered (with a `DiscoverAck` naming us).
    pub discover_answered: AtomicU64,
    /// Nodes entered into the node table from a candidate address's answer.
    pub discovered_by_address: AtomicU64,
    /// Candidate addresses that answered with another node id than the one
    /// bound to them: the old id was removed (`Invalidated`).
    pub discovery_replaced: AtomicU64,
    /// Probes not answered: over the answer rate.
    pub dropped_probe_rate: AtomicU64,
    /// Probes not answered: with a key, from an address that is neither a
    /// candidate nor in the node table.
    pub dropped_probe_foreign: AtomicU64,
    /// Probes and answers from candidate addresses carrying our own node id.
    pub dropped_own_id: AtomicU64,
    /// Times the job thread woke (a packet, a job, or a timer): it sleeps
    /// until its next timer, at most a second, so an idle manager wakes about
    /// once a second.
    pub job_wakeups: AtomicU64,
}

impl ConStats {
    /// The counters by their names in the statistics map.
    pub fn entries(&self) -> [(&'static str, u64); 20] {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("packets_in", l(&self.packets_in)),
            ("packets_out", l(&self.packets_out)),
            ("dropped_malformed", l(&self.dropped_malformed)),
            ("dropped_foreign", l(&self.dropped_foreign)),
            ("dropped_spoofed", l(&self.dropped_spoofed)),
            ("dropped_stale", l(&self.dropped_stale)),
            ("connections_created", l(&self.created)),
            ("connections_closed", l(&self.closed)),
            ("closes_drained", l(&self.closes_drained)),
            ("closes_timed_out", l(&self.closes_timed_out)),
            ("jobs_dropped", l(&self.jobs_dropped)),
            ("foreign_fabric", l(&self.foreign_fabric)),
            ("discover_probes", l(&self.discover_probes)),
            ("discover_answered", l(&self.discover_answered)),
            ("discovered_by_address", l(&self.discovered_by_address)),
            ("discovery_replaced", l(&self.discovery_replaced)),
            ("dropped_probe_rate", l(&self.dropped_probe_rate)),
            ("dropped_probe_foreign", l(&self.dropped_probe_foreign)),
            ("dropped_own_id", l(&self.dropped_own_id)),
            ("job_wakeups", l(&self.job_wakeups)),
        ]
    }
}
