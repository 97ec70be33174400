//! Connection management (paper §7.1): node ids and the node table, the UDP
//! protocol, connections and the manager with its job thread.

pub mod connection;
pub mod manager;
pub mod node;
pub mod proto;

pub use connection::{ConState, Connection, SendRing};
pub use manager::{ConError, ConManager, NodeEvent, QueueSet};
pub use node::{NodeId, NodeTable};
