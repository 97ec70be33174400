//! Node identities and the node table (id → UDP address), which grows and
//! shrinks at run time.

use std::collections::HashMap;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
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
    /// Adds a node; the same id again is accepted only with the same address.
    pub fn add_unique(&self, id: NodeId, addr: SocketAddr) -> Result<(), String> {
        if !id.is_valid() {
            return Err("node id 65535 (0xFFFF) is reserved as invalid".into());
        }
        let mut nodes = self.nodes.write().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = nodes.get(&id) {
            return if *old == addr {
                Ok(())
            } else {
                Err(format!(
                    "node id {id} ({}) is already in the node table at {old}; {addr} would use it twice \
                     (remove the node first to move it)",
                    id.0
                ))
            };
        }
        nodes.insert(id, addr);
        Ok(())
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

/// Parses `ip:port`, or resolves `host:port` (an IPv4 address if the host
/// has one, else its first address). The error says what did not work.
pub fn resolve_address(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = t.rsplit_once(':').ok_or_else(|| format!("'{t}' is not host:port"))?;
    let port = port.parse::<u16>().map_err(|_| format!("'{t}': port '{port}' is not in [0, 65535]"))?;
    resolve_host(host, port)
}

/// Resolves `host` (a name or an IP address) with `port`, preferring IPv4.
pub fn resolve_host(host: &str, port: u16) -> Result<SocketAddr, String> {
    let host = host.trim().trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("':{port}': the host is empty"));
    }
    let addrs: Vec<SocketAddr> =
        (host, port).to_socket_addrs().map_err(|e| format!("host '{host}' does not resolve: {e}"))?.collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("host '{host}' resolves to no address"))
}
