//! The jobs other threads post to the job thread ([`Job`]). They travel
//! through a lock-free queue of `u32`: [`Job::encode`] and [`Job::decode`]
//! are the only places that know the packing (kind in the high 16 bits, the
//! node id in the low 16).

use crate::con::node::NodeId;

/// One request for the job thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Job {
    /// Create a connection to the node (if there is none) and start the exchange.
    Create(NodeId),
    /// Close the connection in order, in two phases (see [`super::close`]).
    Close(NodeId),
    /// Close the connection at once (reported as `Disconnected`).
    CloseForce(NodeId),
    /// The node left the node table: close, forget it, report `Invalidated`.
    NodeRemoved(NodeId),
    /// Report `Lost` for the node (the send thread saw its data fail).
    Lost(NodeId),
    /// Nothing: only wakes the loop (at shutdown).
    Wake,
}

impl Job {
    /// The queue's form.
    pub(super) fn encode(self) -> u32 {
        let (kind, node) = match self {
            Job::Create(n) => (1, n),
            Job::Close(n) => (2, n),
            Job::CloseForce(n) => (3, n),
            Job::NodeRemoved(n) => (4, n),
            Job::Wake => (5, NodeId(0)),
            Job::Lost(n) => (6, n),
        };
        (kind << 16) | u32::from(node.0)
    }

    /// The job `v` encodes; `None` for a value no [`Job::encode`] makes.
    pub(super) fn decode(v: u32) -> Option<Job> {
        let node = NodeId((v & 0xFFFF) as u16);
        Some(match v >> 16 {
            1 => Job::Create(node),
            2 => Job::Close(node),
            3 => Job::CloseForce(node),
            4 => Job::NodeRemoved(node),
            5 => Job::Wake,
            6 => Job::Lost(node),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_survives_the_queue() {
        for n in [NodeId(0), NodeId(7), NodeId(0xFFFE)] {
            for job in [Job::Create(n), Job::Close(n), Job::CloseForce(n), Job::NodeRemoved(n), Job::Lost(n), Job::Wake]
            {
                assert_eq!(Job::decode(job.encode()), Some(job));
            }
        }
        assert_eq!(Job::decode(0), None);
        assert_eq!(Job::decode(7 << 16), None);
    }
}
