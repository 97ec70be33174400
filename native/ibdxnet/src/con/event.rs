//! What the connection manager tells its user about nodes
//! ([`NodeEvent`], delivered on the job thread through an [`EventSink`]).

use std::sync::Arc;

use super::node::NodeId;

/// What the manager tells its user about nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeEvent {
    /// A node answered for the first time (or again after a failure).
    Discovered(NodeId),
    /// A node was removed from the node table.
    Invalidated(NodeId),
    /// An established connection to the node failed (or the node restarted
    /// or was removed): data in flight may be lost.
    Disconnected(NodeId),
    /// An established connection was closed in order (evicted by either side,
    /// or replaced by a fresh one): nothing failed; use it again to reconnect.
    Closed(NodeId),
    /// Data posted on a connection that had been closed in order did not
    /// arrive (its work requests failed): the closed connection's data in
    /// flight is lost, which the user must hear about.
    Lost(NodeId),
    /// The peer shut down (its `Leave` closed our established connection);
    /// `handled`: the bytes we sent on it that its application handled beyond
    /// its last flow-control confirmation, if it said (an orderly shutdown) —
    /// whatever stays unconfirmed after that was not handled.
    Left {
        /// The node that left.
        node: NodeId,
        /// See the variant.
        handled: Option<u64>,
    },
}

/// Receives node events (called on the job thread).
pub type EventSink = Arc<dyn Fn(NodeEvent) + Send + Sync>;
