//! Which node a local queue pair number belongs to. A closed queue pair
//! stays known for a while (the last [`RETIRED_QPNS`]): completions it left
//! in the shared receive CQ are polled after it closed and must still be
//! checked against the node they came from.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, RwLock};

use crate::con::node::NodeId;
use crate::util::lock;

/// Closed queue pairs remembered for late receive completions.
const RETIRED_QPNS: usize = 1024;

/// The owner of one local queue pair number.
#[derive(Debug, Clone, Copy)]
struct Owner {
    node: NodeId,
    open: bool,
}

/// Local QPN → owning node (open or recently closed).
#[derive(Debug, Default)]
pub(super) struct QpnIndex {
    owners: RwLock<HashMap<u32, Owner>>,
    /// Closed queue pairs still in `owners`, oldest first.
    retired: Mutex<VecDeque<u32>>,
}

impl QpnIndex {
    /// `qpn` is open and belongs to `node`.
    pub(super) fn open(&self, qpn: u32, node: NodeId) {
        self.owners.write().unwrap_or_else(|p| p.into_inner()).insert(qpn, Owner { node, open: true });
    }

    /// The node an open `qpn` belongs to.
    pub(super) fn node_of_open(&self, qpn: u32) -> Option<NodeId> {
        self.source_of(qpn).filter(|e| e.1).map(|e| e.0)
    }

    /// The node `qpn` belongs or recently belonged to, and whether it is open.
    pub(super) fn source_of(&self, qpn: u32) -> Option<(NodeId, bool)> {
        self.owners.read().unwrap_or_else(|p| p.into_inner()).get(&qpn).map(|o| (o.node, o.open))
    }

    /// Marks `node`'s `qpn` closed; the oldest of more than [`RETIRED_QPNS`] are forgotten.
    pub(super) fn retire(&self, qpn: u32, node: NodeId) {
        let mut m = self.owners.write().unwrap_or_else(|p| p.into_inner());
        if let Some(o) = m.get_mut(&qpn).filter(|o| o.node == node) {
            o.open = false;
        }
        let mut r = lock(&self.retired);
        r.push_back(qpn);
        while r.len() > RETIRED_QPNS {
            let Some(old) = r.pop_front() else { break };
            // Only if it was not reused by a newer connection meanwhile.
            if m.get(&old).is_some_and(|o| !o.open) {
                m.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_queue_pairs_are_remembered_until_enough_newer_ones_closed() {
        let q = QpnIndex::default();
        q.open(10, NodeId(1));
        assert_eq!(q.node_of_open(10), Some(NodeId(1)));
        q.retire(10, NodeId(1));
        assert_eq!(q.node_of_open(10), None);
        assert_eq!(q.source_of(10), Some((NodeId(1), false)));
        // Reused by a newer connection before it is forgotten: stays open.
        q.open(10, NodeId(2));
        for qpn in 100..101 + RETIRED_QPNS as u32 {
            q.open(qpn, NodeId(3));
            q.retire(qpn, NodeId(3));
        }
        assert_eq!(q.source_of(10), Some((NodeId(2), true)));
        assert_eq!(q.source_of(100), None, "the oldest retired one is forgotten");
        assert_eq!(q.source_of(101), Some((NodeId(3), false)));
    }
}
