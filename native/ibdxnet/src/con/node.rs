//! Node identities and the node table (id → UDP address), which grows and
//! shrinks at run time.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::RwLock;

/// A 16-bit node id. [`NodeId::INVALID`] (`0xFFFF`) is never a real node.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NodeId(pub u16);

impl NodeId {
    /// The invalid node id.
    pub const INVALID: NodeId = NodeId(0xFFFF);

    /// A node id, or `None` for `0xFFFF`.
    pub fn new(raw: u16) -> Option<NodeId> {
        (raw != 0xFFFF).then_some(NodeId(raw))
    }
    /// True unless this is [`NodeId::INVALID`].
    pub fn is_valid(self) -> bool {
        self != NodeId::INVALID
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04X}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Node id → UDP address of its connection manager.
#[derive(Debug, Default)]
pub struct NodeTable {
    nodes: RwLock<HashMap<NodeId, SocketAddr>>,
}

impl NodeTable {
    /// Adds or updates a node; returns the previous address.
    pub fn add(&self, id: NodeId, addr: SocketAddr) -> Result<Option<SocketAddr>, String> {
        if !id.is_valid() {
            return Err("node id 0xFFFF is reserved as invalid".into());
        }
        Ok(self.nodes.write().unwrap_or_else(|p| p.into_inner()).insert(id, addr))
    }
    /// Removes a node; returns its address if it was known.
    pub fn remove(&self, id: NodeId) -> Option<SocketAddr> {
        self.nodes.write().unwrap_or_else(|p| p.into_inner()).remove(&id)
    }
    /// The address of a node.
    pub fn get(&self, id: NodeId) -> Option<SocketAddr> {
        self.nodes.read().unwrap_or_else(|p| p.into_inner()).get(&id).copied()
    }
    /// All nodes.
    pub fn all(&self) -> Vec<(NodeId, SocketAddr)> {
        self.nodes.read().unwrap_or_else(|p| p.into_inner()).iter().map(|(k, v)| (*k, *v)).collect()
    }
}
