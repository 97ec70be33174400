//! Connection management (paper §7.1): node ids and the node table, the UDP
//! protocol, connections and the manager with its job thread.

pub mod auth;
pub mod auth_key;
pub mod connection;
pub mod manager;
pub mod node;
pub mod proto;

pub use auth::AuthProblem;
pub use auth_key::AuthKey;
pub use connection::{ConState, Connection, SendRing};
pub use manager::{ConError, ConManager, NodeEvent, QueueSet};
pub use node::{NodeId, NodeTable};
