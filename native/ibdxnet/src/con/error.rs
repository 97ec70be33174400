//! Why a connection could not be had ([`ConError`], returned by
//! [`super::ConManager::connect`] and the engine's connect).

use std::time::Duration;

use super::auth::AuthProblem;
use super::node::NodeId;

/// Why a connection could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConError {
    /// The connection did not come up in time.
    #[error("connection to node {node} not established after {waited:?}")]
    Timeout {
        /// Target node.
        node: NodeId,
        /// How long the caller waited.
        waited: Duration,
    },
    /// The node is not in the node table.
    #[error("node {0} is not in the node table")]
    UnknownNode(NodeId),
    /// The node's table entry has an unspecified address (`0.0.0.0`, `::`):
    /// it names no peer (packets claiming the node are refused, none are
    /// sent to it). An unspecified address belongs only in a node's own
    /// entry: listen on every interface.
    #[error(
        "node {node}'s table address {addr} is unspecified: it names no peer (nothing is sent to it, nothing \
         claiming node {node} is accepted); give the address its packets come from (an unspecified address \
         belongs only in a node's own entry or listen: listen on every interface)"
    )]
    UnspecifiedAddress {
        /// Target node.
        node: NodeId,
        /// Its table address.
        addr: std::net::SocketAddr,
    },
    /// A node cannot connect to itself (use the loopback transport).
    #[error("a node cannot connect to itself")]
    SelfConnection,
    /// The engine is shutting down.
    #[error("the engine is shutting down")]
    ShutDown,
    /// The job queue is full.
    #[error("the connection manager's job queue is full")]
    Busy,
    /// The node and this one disagree about authentication (one has a key,
    /// the other not, or the keys differ): packets were refused.
    #[error("node {node} {}", problem.describe())]
    Auth {
        /// Target node.
        node: NodeId,
        /// What was wrong with its packets.
        problem: AuthProblem,
    },
    /// The node is on another fabric instance (another process's sim
    /// network, or sim against an RDMA device): its queue pairs cannot be
    /// reached from here.
    #[error("node {} {}", node.0, crate::fabric::foreign_reason(*ours, *theirs))]
    ForeignFabric {
        /// Target node.
        node: NodeId,
        /// Our sim network (0: an RDMA device).
        ours: u64,
        /// The node's sim network (0: an RDMA device).
        theirs: u64,
    },
}
