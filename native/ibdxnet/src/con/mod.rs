//! Connection management (paper §7.1): node ids and the node table, the UDP
//! protocol, connections and the manager with its job thread.
//!
//! `con` depends only on the layers below it (`fabric`, `sys`, `util`); the
//! engine (`msgrc`) hands it a [`ConConfig`] built from its own configuration.

pub mod auth;
pub mod auth_key;
pub mod config;
pub mod connection;
pub mod error;
pub mod event;
pub mod manager;
pub mod node;
pub mod proto;
pub mod stats;

pub use auth::AuthProblem;
pub use auth_key::{AuthKey, AuthKeyError};
pub use config::ConConfig;
pub use connection::{ConState, Connection, SendRing};
pub use error::ConError;
pub use event::{EventSink, NodeEvent};
pub use manager::{ConManager, QueueSet};
pub use node::{AddressError, NodeError, NodeId, NodeTable};
pub use stats::ConStats;
