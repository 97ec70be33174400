//! What the connection manager needs to know, and nothing more: its node
//! id, its UDP address, the control-plane key, the connection limit, the
//! size of each connection's send ring, the timers of the protocol and
//! the flow-control unit it tells peers.
//!
//! The engine builds it from its own configuration (`msgrc` owns the keys,
//! their defaults and their validation); `con` never reads the engine's.

use std::net::SocketAddr;
use std::time::Duration;

use super::auth_key::AuthKey;
use super::node::NodeId;

/// The connection manager's configuration.
#[derive(Debug, Clone)]
pub struct ConConfig {
    /// This node's id.
    pub node_id: NodeId,
    /// Local UDP address of the connection manager.
    pub listen: SocketAddr,
    /// Pre-shared key sealing every packet (`None`: packets are not sealed).
    pub auth_key: Option<AuthKey>,
    /// Most established connections; the least recently used idle one is
    /// evicted beyond it (if `evict_at_limit`).
    pub max_connections: u32,
    /// Whether the limit evicts; false: it only sizes the completion queues
    /// (upstream DXNet closes connections in Java alone, as its C++ library
    /// never evicted).
    pub evict_at_limit: bool,
    /// Bytes of each connection's send ring (a power of two).
    pub send_ring_size: u32,
    /// How long a connect waits; also bounds an orderly close, and three
    /// times it a connection that does not come up.
    pub connect_timeout: Duration,
    /// Retransmission interval of exchanges and of the close packets.
    pub exchange_retry: Duration,
    /// Interval of discovery rounds for nodes not heard from.
    pub discovery_interval: Duration,
    /// Bytes one flow-control confirmation stands for in what we send (our
    /// user's window × threshold), told to every peer in the exchange.
    pub flow_unit: u64,
}
