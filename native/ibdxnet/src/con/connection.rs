//! One connection: an RC queue pair to a remote node plus the send ring the
//! engine posts from. Handed out as `Arc` (the reference count is the handle
//! count); the queue pair and ring are released when the last handle goes.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::node::NodeId;
use crate::fabric::{Fabric, FabricError, MemoryRegion, QpEndpoint, QueuePair};
use crate::sys::region::Region;

/// Connection states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ConState {
    /// Queue pair created, waiting for the peer's endpoint.
    Pending = 0,
    /// Queue pair connected; the peer has not yet confirmed it is connected to us.
    Connected = 1,
    /// Both sides connected: data may flow.
    Established = 2,
    /// Closing: nothing new is posted; waiting until both sides' work
    /// requests are acknowledged (the two-phase close).
    Closing = 3,
    /// Closed: the queue pair is in the error state.
    Closed = 4,
}

impl ConState {
    fn from_u8(v: u8) -> ConState {
        match v {
            0 => ConState::Pending,
            1 => ConState::Connected,
            2 => ConState::Established,
            3 => ConState::Closing,
            _ => ConState::Closed,
        }
    }
}

/// The registered send ring of a connection. Field order = drop order.
pub struct SendRing<F: Fabric> {
    mr: F::Mr,
    region: Region,
}

impl<F: Fabric> std::fmt::Debug for SendRing<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SendRing({:?})", self.region)
    }
}

impl<F: Fabric> SendRing<F> {
    /// Allocates and registers `size` bytes.
    pub fn new(fabric: &F, size: u32) -> Result<Self, FabricError> {
        let region = Region::new(size as usize)?;
        // SAFETY: `region` is owned by the ring and dropped after `mr`.
        let mr = unsafe { fabric.register(region.ptr(), size as usize) }?;
        Ok(SendRing { mr, region })
    }
    /// First byte.
    pub fn address(&self) -> *mut u8 {
        self.region.ptr()
    }
    /// Size in bytes (a power of two).
    pub fn size(&self) -> u32 {
        self.region.len() as u32
    }
    /// Local key for SGEs.
    pub fn lkey(&self) -> u32 {
        self.mr.lkey()
    }
}

/// A connection to one remote node.
#[derive(Debug)]
pub struct Connection<F: Fabric> {
    node: NodeId,
    qp: F::Qp,
    ring: SendRing<F>,
    state: AtomicU8,
    peer_qpn: AtomicU32,
    peer_instance: AtomicU32,
    /// The peer's flow-control unit from the exchange that connected us (0 until then).
    peer_flow_unit: AtomicU64,
    created: Instant,
    /// Milliseconds since `created` of the last use (for LRU eviction).
    last_used_ms: AtomicU64,
    /// Milliseconds since `created` when it became established (`u64::MAX` before).
    established_ms: AtomicU64,
    /// [`Connection::touch`] was called since it became established (a caller
    /// took it, or the send thread posted on it).
    touched: AtomicBool,
    /// Send work requests posted and not yet completed (kept by the send
    /// thread; reserved before posting, see [`Connection::begin_posting`]).
    inflight: AtomicU32,
    /// Its manager's count of state changes, bumped by every one
    /// ([`ConManager::state_changes`](super::ConManager::state_changes)).
    changes: Arc<AtomicU64>,
}

impl<F: Fabric> Connection<F> {
    pub(crate) fn new(node: NodeId, qp: F::Qp, ring: SendRing<F>, changes: Arc<AtomicU64>) -> Self {
        Connection {
            node,
            qp,
            ring,
            state: AtomicU8::new(ConState::Pending as u8),
            peer_qpn: AtomicU32::new(0),
            peer_instance: AtomicU32::new(0),
            peer_flow_unit: AtomicU64::new(0),
            created: Instant::now(),
            last_used_ms: AtomicU64::new(0),
            established_ms: AtomicU64::new(u64::MAX),
            touched: AtomicBool::new(false),
            inflight: AtomicU32::new(0),
            changes,
        }
    }

    /// The remote node.
    pub fn node(&self) -> NodeId {
        self.node
    }
    /// This side's queue pair number.
    pub fn local_qpn(&self) -> u32 {
        crate::fabric::QueuePair::qp_num(&self.qp)
    }
    /// The queue pair.
    pub fn qp(&self) -> &F::Qp {
        &self.qp
    }
    /// The send ring.
    pub fn ring(&self) -> &SendRing<F> {
        &self.ring
    }
    /// Current state.
    pub fn state(&self) -> ConState {
        ConState::from_u8(self.state.load(Ordering::Acquire))
    }
    pub(crate) fn set_state(&self, s: ConState) {
        self.state.store(s as u8, Ordering::SeqCst);
        // Release, after the store: whoever reads the new count sees the new state.
        self.changes.fetch_add(1, Ordering::Release);
    }
    /// True if data may be posted.
    pub fn is_established(&self) -> bool {
        self.state() == ConState::Established
    }
    /// The peer's queue pair number (0 until known).
    pub fn peer_qpn(&self) -> u32 {
        self.peer_qpn.load(Ordering::Acquire)
    }
    /// The peer's instance id (0 until known).
    pub fn peer_instance(&self) -> u32 {
        self.peer_instance.load(Ordering::Acquire)
    }
    /// Bytes one flow-control confirmation stands for in what the peer sends
    /// on this connection (its exchange said; 0 until connected).
    pub fn peer_flow_unit(&self) -> u64 {
        self.peer_flow_unit.load(Ordering::Acquire)
    }
    /// True if this connection is connected to queue pair `qpn` of peer instance `instance`.
    pub fn is_peer(&self, instance: u32, qpn: u32) -> bool {
        self.peer_instance() == instance && self.peer_qpn() == qpn
    }
    /// This side's endpoint.
    pub fn endpoint(&self) -> QpEndpoint {
        self.qp.endpoint()
    }
    /// Connects the queue pair to the peer's endpoint; `flow_unit` is the
    /// peer's flow-control unit (stored before anything can arrive on it).
    pub(crate) fn connect(&self, remote: &QpEndpoint, instance: u32, flow_unit: u64) -> Result<(), FabricError> {
        self.peer_flow_unit.store(flow_unit, Ordering::Release);
        self.qp.connect(remote)?;
        self.peer_qpn.store(remote.qpn, Ordering::Release);
        self.peer_instance.store(instance, Ordering::Release);
        self.set_state(ConState::Connected);
        Ok(())
    }
    /// Send thread: reserves `n` work requests before posting them; false
    /// (nothing reserved) if the connection is no longer established —
    /// unless `confirming` (a zero-length flush that only makes earlier work
    /// requests complete, allowed while closing).
    ///
    /// Paired with the job thread's `set_state(Closing)` then [`Connection::inflight`]:
    /// both sides use sequentially consistent operations, so either the job
    /// thread sees the reservation or the send thread sees `Closing` — once
    /// a closing connection reads 0 in flight, nothing more is posted on it.
    pub(crate) fn begin_posting(&self, n: u32, confirming: bool) -> bool {
        self.inflight.fetch_add(n, Ordering::SeqCst);
        let state = ConState::from_u8(self.state.load(Ordering::SeqCst));
        if state == ConState::Established || (confirming && state == ConState::Closing) {
            return true;
        }
        self.inflight.fetch_sub(n, Ordering::SeqCst);
        false
    }
    /// Send thread: `n` reserved work requests were not posted, or completed.
    pub(crate) fn end_posting(&self, n: u32) {
        self.inflight.fetch_sub(n, Ordering::SeqCst);
    }
    /// Send work requests posted (or about to be) and not yet completed.
    pub fn inflight(&self) -> u32 {
        self.inflight.load(Ordering::SeqCst)
    }
    /// Records a use (send or receive) for LRU eviction.
    pub fn touch(&self) {
        self.last_used_ms.store(self.created.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.touched.store(true, Ordering::Relaxed);
    }
    /// When the connection was last used.
    pub fn last_used(&self) -> Instant {
        self.created + std::time::Duration::from_millis(self.last_used_ms.load(Ordering::Relaxed))
    }
    /// Job thread: both sides are connected. Its idle time counts from now,
    /// and so does [`Connection::established_at`]; not a use
    /// ([`Connection::touched_since_established`] is false until one).
    pub(crate) fn set_established(&self) {
        let now = self.created.elapsed().as_millis() as u64;
        self.last_used_ms.store(now, Ordering::Relaxed);
        self.established_ms.store(now, Ordering::Relaxed);
        self.touched.store(false, Ordering::Relaxed);
        self.set_state(ConState::Established);
    }
    /// True if [`Connection::touch`] was called since it became established.
    pub fn touched_since_established(&self) -> bool {
        self.established_ms.load(Ordering::Relaxed) != u64::MAX && self.touched.load(Ordering::Relaxed)
    }
    /// When the connection became established (`None` before).
    pub fn established_at(&self) -> Option<Instant> {
        let ms = self.established_ms.load(Ordering::Relaxed);
        (ms != u64::MAX).then(|| self.created + std::time::Duration::from_millis(ms))
    }
}
