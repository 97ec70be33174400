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

/// Why a node cannot be added to the node table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// [`NodeId::INVALID`] names no node.
    #[error("node id 65535 (0xFFFF) is reserved as invalid")]
    Reserved,
    /// The id is in the table with another address.
    #[error(
        "node id {id} ({}) is already in the node table at {old}; {new} would use it twice \
         (remove the node first to move it)",
        id.0
    )]
    Duplicate {
        /// The node id.
        id: NodeId,
        /// Its address in the table.
        old: SocketAddr,
        /// The address refused.
        new: SocketAddr,
    },
    /// The id is this node's own.
    #[error("node id {0} ({}) is this node's own id (node_id); it cannot be added as a peer", .0.0)]
    OwnId(NodeId),
    /// A candidate address that names no peer: an unspecified IP
    /// (`0.0.0.0`, `::`) or port 0.
    #[error("address {0} names no peer (unspecified IP or port 0); give the address a node listens on")]
    NoPeerAddress(SocketAddr),
    /// The address is this node's own listen address.
    #[error("node {id}: address {addr} is this node's own listen address")]
    OwnAddress {
        /// The node id.
        id: NodeId,
        /// The address refused.
        addr: SocketAddr,
    },
}

/// Why a node's address could not be had from its text.
#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    /// No `:` separates host and port.
    #[error("'{0}' is not host:port")]
    NotHostPort(String),
    /// The port is not a number in range.
    #[error("'{text}': port '{port}' is not in [0, 65535]")]
    BadPort {
        /// The whole text.
        text: String,
        /// The port part.
        port: String,
    },
    /// Nothing before the port.
    #[error("':{0}': the host is empty")]
    EmptyHost(u16),
    /// Name resolution failed.
    #[error("host '{host}' does not resolve: {source}")]
    DoesNotResolve {
        /// The host.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// Name resolution returned nothing.
    #[error("host '{0}' resolves to no address")]
    NoAddress(String),
}

/// Node id → UDP address of its connection manager.
#[derive(Debug, Default)]
pub struct NodeTable {
    nodes: RwLock<Nodes>,
}

#[derive(Debug, Default)]
struct Nodes {
    by_id: HashMap<NodeId, SocketAddr>,
    /// How many ids each address has (a lookup by source address in O(1)).
    addrs: HashMap<SocketAddr, usize>,
}

impl Nodes {
    fn insert(&mut self, id: NodeId, addr: SocketAddr) -> Option<SocketAddr> {
        let old = self.by_id.insert(id, addr);
        if let Some(o) = old {
            self.forget_addr(o);
        }
        *self.addrs.entry(addr).or_insert(0) += 1;
        old
    }
    fn remove(&mut self, id: NodeId) -> Option<SocketAddr> {
        let old = self.by_id.remove(&id);
        if let Some(o) = old {
            self.forget_addr(o);
        }
        old
    }
    fn forget_addr(&mut self, addr: SocketAddr) {
        if let Some(n) = self.addrs.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                self.addrs.remove(&addr);
            }
        }
    }
}

impl NodeTable {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Nodes> {
        self.nodes.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Nodes> {
        self.nodes.write().unwrap_or_else(|p| p.into_inner())
    }
    /// Adds or updates a node; returns the previous address.
    pub fn add(&self, id: NodeId, addr: SocketAddr) -> Result<Option<SocketAddr>, NodeError> {
        if !id.is_valid() {
            return Err(NodeError::Reserved);
        }
        Ok(self.write().insert(id, addr))
    }
    /// Adds a node; the same id again is accepted only with the same address.
    pub fn add_unique(&self, id: NodeId, addr: SocketAddr) -> Result<(), NodeError> {
        if !id.is_valid() {
            return Err(NodeError::Reserved);
        }
        let mut nodes = self.write();
        match nodes.by_id.get(&id) {
            Some(old) if *old == addr => Ok(()),
            Some(old) => Err(NodeError::Duplicate { id, old: *old, new: addr }),
            None => {
                nodes.insert(id, addr);
                Ok(())
            }
        }
    }
    /// Removes a node; returns its address if it was known.
    pub fn remove(&self, id: NodeId) -> Option<SocketAddr> {
        self.write().remove(id)
    }
    /// Removes `id` only if its address is `addr`.
    pub fn remove_at(&self, id: NodeId, addr: SocketAddr) -> bool {
        let mut nodes = self.write();
        nodes.by_id.get(&id) == Some(&addr) && nodes.remove(id).is_some()
    }
    /// The address of a node.
    pub fn get(&self, id: NodeId) -> Option<SocketAddr> {
        self.read().by_id.get(&id).copied()
    }
    /// True if some node's address is `addr` (O(1)).
    pub fn has_address(&self, addr: SocketAddr) -> bool {
        self.read().addrs.contains_key(&addr)
    }
    /// A node at `addr`, if there is one.
    pub fn id_at(&self, addr: SocketAddr) -> Option<NodeId> {
        let nodes = self.read();
        if !nodes.addrs.contains_key(&addr) {
            return None;
        }
        nodes.by_id.iter().find(|e| *e.1 == addr).map(|e| *e.0)
    }
    /// All nodes.
    pub fn all(&self) -> Vec<(NodeId, SocketAddr)> {
        self.read().by_id.iter().map(|(k, v)| (*k, *v)).collect()
    }
}

/// Parses `ip:port`, or resolves `host:port` (an IPv4 address if the host
/// has one, else its first address). The error says what did not work.
pub fn resolve_address(text: &str) -> Result<SocketAddr, AddressError> {
    let t = text.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = t.rsplit_once(':').ok_or_else(|| AddressError::NotHostPort(t.to_owned()))?;
    let port = port.parse::<u16>().map_err(|_| AddressError::BadPort { text: t.to_owned(), port: port.to_owned() })?;
    resolve_host(host, port)
}

/// Resolves `host` (a name or an IP address) with `port`, preferring IPv4.
pub fn resolve_host(host: &str, port: u16) -> Result<SocketAddr, AddressError> {
    let host = host.trim().trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(AddressError::EmptyHost(port));
    }
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|source| AddressError::DoesNotResolve { host: host.to_owned(), source })?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| AddressError::NoAddress(host.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_index_follows_every_change() {
        let t = NodeTable::default();
        let (a, b): (SocketAddr, SocketAddr) = ("10.0.0.1:5730".parse().unwrap(), "10.0.0.2:5730".parse().unwrap());
        t.add(NodeId(1), a).unwrap();
        t.add(NodeId(2), a).unwrap();
        assert!(t.has_address(a) && !t.has_address(b));
        t.add(NodeId(1), b).unwrap(); // moved
        assert!(t.has_address(a) && t.has_address(b));
        assert_eq!(t.id_at(a), Some(NodeId(2)));
        assert!(!t.remove_at(NodeId(2), b), "not at that address");
        assert!(t.remove_at(NodeId(2), a));
        assert!(!t.has_address(a) && t.id_at(a).is_none());
        assert_eq!(t.remove(NodeId(1)), Some(b));
        assert!(!t.has_address(b));
    }
}
