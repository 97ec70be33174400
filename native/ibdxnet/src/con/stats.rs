//! The connection manager's counters ([`ConStats`]) and their names in the
//! engine's statistics map ([`CON_COUNTERS`], the one place they are spelled).
//! In an engine they are slots of its counters table (`msgrc::stats`), which
//! Java reads in place.

use std::sync::atomic::Ordering;

use crate::sys::counter::CounterSlot;

/// Counters of the connection manager: one cache-line slot each, in the
/// order of [`CON_COUNTERS`].
#[repr(C)]
#[derive(Debug, Default)]
pub struct ConStats {
    /// Packets received and accepted.
    pub packets_in: CounterSlot,
    /// Packets sent.
    pub packets_out: CounterSlot,
    /// Packets dropped as malformed (bad magic, version, type, lengths, fields).
    pub dropped_malformed: CounterSlot,
    /// Packets dropped because of an unknown source or a wrong destination.
    pub dropped_foreign: CounterSlot,
    /// Packets naming a known source node but not sent from that node's
    /// address in the node table (forged source, or a forged instance id).
    pub dropped_spoofed: CounterSlot,
    /// Close packets that match no current connection (wrong queue pair or
    /// instance id of the peer, e.g. late from a previous instance).
    pub dropped_stale: CounterSlot,
    /// Connections created.
    pub created: CounterSlot,
    /// Connections closed.
    pub closed: CounterSlot,
    /// Orderly closes completed by both sides' `Done` (nothing left in flight).
    pub closes_drained: CounterSlot,
    /// Orderly closes the peer did not complete within the connect timeout
    /// (taken down anyway; a loss shows as `Lost` or `Disconnected`).
    pub closes_timed_out: CounterSlot,
    /// Jobs that did not fit the job queue.
    pub jobs_dropped: CounterSlot,
    /// Exchanges refused, and refusals received, because the peer is on
    /// another fabric instance.
    pub foreign_fabric: CounterSlot,
    /// Probes (`Discover` to any node) sent to candidate addresses.
    pub discover_probes: CounterSlot,
    /// Probes answered (with a `DiscoverAck` naming us).
    pub discover_answered: CounterSlot,
    /// Nodes entered into the node table from a candidate address's answer.
    pub discovered_by_address: CounterSlot,
    /// Candidate addresses that answered with another node id than the one
    /// bound to them: the old id was removed (`Invalidated`).
    pub discovery_replaced: CounterSlot,
    /// Probes not answered: over the answer rate.
    pub dropped_probe_rate: CounterSlot,
    /// Probes not answered: with a key, from an address that is neither a
    /// candidate nor in the node table.
    pub dropped_probe_foreign: CounterSlot,
    /// Probes and answers from candidate addresses carrying our own node id.
    pub dropped_own_id: CounterSlot,
    /// Times the job thread woke (a packet, a job, or a timer): it sleeps
    /// until its next timer, at most a second, so an idle manager wakes about
    /// once a second.
    pub job_wakeups: CounterSlot,
}

/// One counter of [`ConStats`].
pub type ConCounter = crate::sys::counter::CounterDesc<ConStats>;

use crate::sys::counter::counter_desc as con_counter;

/// Every counter of [`ConStats`], in the order of its fields.
#[rustfmt::skip]
pub static CON_COUNTERS: &[ConCounter] = &[
    con_counter!(packets_in, packets_in, "control packets received and accepted"),
    con_counter!(packets_out, packets_out, "control packets sent"),
    con_counter!(dropped_malformed, dropped_malformed, "packets dropped as malformed (magic, version, type, lengths, fields)"),
    con_counter!(dropped_foreign, dropped_foreign, "packets dropped: unknown source or wrong destination"),
    con_counter!(dropped_spoofed, dropped_spoofed, "packets naming a known node but not sent from its address"),
    con_counter!(dropped_stale, dropped_stale, "close packets matching no current connection"),
    con_counter!(connections_created, created, "connections created"),
    con_counter!(connections_closed, closed, "connections closed"),
    con_counter!(closes_drained, closes_drained, "orderly closes completed by both sides"),
    con_counter!(closes_timed_out, closes_timed_out, "orderly closes the peer did not complete in time"),
    con_counter!(jobs_dropped, jobs_dropped, "jobs that did not fit the job queue"),
    con_counter!(foreign_fabric, foreign_fabric, "exchanges refused (either way): peer on another fabric instance"),
    con_counter!(discover_probes, discover_probes, "discovery probes sent to candidate addresses"),
    con_counter!(discover_answered, discover_answered, "discovery probes answered"),
    con_counter!(discovered_by_address, discovered_by_address, "nodes entered from a candidate address's answer"),
    con_counter!(discovery_replaced, discovery_replaced, "candidate addresses that answered with another node id"),
    con_counter!(dropped_probe_rate, dropped_probe_rate, "probes not answered: over the answer rate"),
    con_counter!(dropped_probe_foreign, dropped_probe_foreign, "probes not answered: keyed, from an unknown address"),
    con_counter!(dropped_own_id, dropped_own_id, "probes and answers carrying our own node id"),
    con_counter!(job_wakeups, job_wakeups, "times the job thread woke"),
];

impl ConStats {
    /// The counters by their names in the statistics map.
    pub fn entries(&self) -> Vec<(&'static str, u64)> {
        CON_COUNTERS.iter().map(|c| (c.name, (c.get)(self).load(Ordering::Relaxed))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_slot_in_field_order() {
        let s = ConStats::default();
        let base = &s as *const ConStats as usize;
        assert_eq!(std::mem::size_of::<ConStats>(), CON_COUNTERS.len() * crate::sys::counter::COUNTER_STRIDE);
        for (i, c) in CON_COUNTERS.iter().enumerate() {
            assert_eq!((c.get)(&s) as *const CounterSlot as usize - base, i * 64, "{}", c.name);
        }
    }
}
