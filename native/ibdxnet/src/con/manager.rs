//! The connection manager (paper §7.1): one job thread owns every change of
//! the connection table. Other threads read the table (established
//! connections, lock-shared) and post jobs into a bounded lock-free queue.
//!
//! Queue pair exchange over UDP converges to one connection per node pair,
//! also when both ends start at once: each side has at most one queue pair
//! per peer and connects it to whatever endpoint the peer announces; a
//! connection is established once the peer confirms it is connected to our
//! queue pair (`peer_qpn` in its packet), and packets say whether their
//! sender is established, so answers go on until both sides are. Lost
//! packets are covered by retransmission while a connection is not
//! established. A peer announcing
//! a new instance id (restart) or a new queue pair replaces the stale one.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::auth::{Auth, AuthProblem, Verdict};
use super::connection::{ConState, Connection, SendRing};
use super::node::{NodeId, NodeTable};
use super::proto::{Body, Packet, LEAVE_UNKNOWN, MAX_PACKET};
use crate::fabric::{Fabric, FabricError, QpCaps, QpState, QueuePair};
use crate::msgrc::config::EngineConfig;
use crate::sys::queue::IndexQueue;
use crate::util::lock;

mod foreign;

/// Only connections idle this long in both directions are evicted at the
/// limit: data published for a connection in use but not yet posted, or data
/// the peer is sending, would go down with it.
const EVICT_IDLE: std::time::Duration = std::time::Duration::from_millis(20);

/// How many finished connections are remembered to answer a peer's late
/// `Close` (see [`ConManager::finished`]).
const FINISHED_MEMORY: usize = 4096;

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

/// Why a connection could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConError {
    /// The connection did not come up in time.
    Timeout {
        /// Target node.
        node: NodeId,
        /// How long the caller waited.
        waited: Duration,
    },
    /// The node is not in the node table.
    UnknownNode(NodeId),
    /// A node cannot connect to itself (use the loopback transport).
    SelfConnection,
    /// The engine is shutting down.
    ShutDown,
    /// The job queue is full.
    Busy,
    /// The node and this one disagree about authentication (one has a key,
    /// the other not, or the keys differ): packets were refused.
    Auth {
        /// Target node.
        node: NodeId,
        /// What was wrong with its packets.
        problem: AuthProblem,
    },
    /// The node is on another fabric instance (another process's sim
    /// network, or sim against an RDMA device): its queue pairs cannot be
    /// reached from here.
    ForeignFabric {
        /// Target node.
        node: NodeId,
        /// Our sim network (0: an RDMA device).
        ours: u64,
        /// The node's sim network (0: an RDMA device).
        theirs: u64,
    },
}

impl std::fmt::Display for ConError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConError::Timeout { node, waited } => {
                write!(f, "connection to node {node} not established after {waited:?}")
            }
            ConError::UnknownNode(n) => write!(f, "node {n} is not in the node table"),
            ConError::SelfConnection => f.write_str("a node cannot connect to itself"),
            ConError::ShutDown => f.write_str("the engine is shutting down"),
            ConError::Busy => f.write_str("the connection manager's job queue is full"),
            ConError::Auth { node, problem } => write!(f, "node {node} {}", problem.describe()),
            ConError::ForeignFabric { node, ours, theirs } => {
                write!(f, "node {} {}", node.0, crate::fabric::foreign_reason(*ours, *theirs))
            }
        }
    }
}

impl std::error::Error for ConError {}

/// The shared queues every connection's queue pair is attached to.
#[derive(Debug)]
pub struct QueueSet<F: Fabric> {
    /// The opened device.
    pub fabric: F,
    /// Shared send completion queue.
    pub send_cq: F::Cq,
    /// Shared receive completion queue.
    pub recv_cq: F::Cq,
    /// Shared receive queue.
    pub srq: F::Srq,
    /// Capabilities of every queue pair.
    pub caps: QpCaps,
}

/// Counters of the connection manager.
#[derive(Debug, Default)]
pub struct ConStats {
    /// Packets received and accepted.
    pub packets_in: AtomicU64,
    /// Packets sent.
    pub packets_out: AtomicU64,
    /// Packets dropped as malformed (bad magic, version, type, lengths, fields).
    pub dropped_malformed: AtomicU64,
    /// Packets dropped because of an unknown source or a wrong destination.
    pub dropped_foreign: AtomicU64,
    /// Packets naming a known source node but not sent from that node's
    /// address in the node table (forged source, or a forged instance id).
    pub dropped_spoofed: AtomicU64,
    /// Close packets that match no current connection (wrong queue pair or
    /// instance id of the peer, e.g. late from a previous instance).
    pub dropped_stale: AtomicU64,
    /// Connections created.
    pub created: AtomicU64,
    /// Connections closed.
    pub closed: AtomicU64,
    /// Orderly closes completed by both sides' `Done` (nothing left in flight).
    pub closes_drained: AtomicU64,
    /// Orderly closes the peer did not complete within the connect timeout
    /// (taken down anyway; a loss shows as `Lost` or `Disconnected`).
    pub closes_timed_out: AtomicU64,
    /// Jobs that did not fit the job queue.
    pub jobs_dropped: AtomicU64,
    /// Exchanges refused, and refusals received, because the peer is on
    /// another fabric instance (see [`foreign`]).
    pub foreign_fabric: AtomicU64,
}

/// Closed queue pairs remembered for late receive completions.
const RETIRED_QPNS: usize = 1024;

const JOB_CREATE: u32 = 1;
const JOB_CLOSE: u32 = 2;
const JOB_CLOSE_FORCE: u32 = 3;
const JOB_NODE_REMOVED: u32 = 4;
const JOB_WAKE: u32 = 5;
const JOB_LOST: u32 = 6;
/// A datagram of one zero byte wakes the job thread (not a protocol packet).
const KICK: [u8; 1] = [0];

/// The connection manager of one engine.
pub struct ConManager<F: Fabric> {
    me: NodeId,
    instance: u32,
    cfg: Arc<EngineConfig>,
    queues: Arc<QueueSet<F>>,
    nodes: NodeTable,
    table: RwLock<HashMap<NodeId, Arc<Connection<F>>>>,
    /// Local QPN → (node, still open). A closed queue pair stays known for a
    /// while: completions it left in the shared receive CQ must still be
    /// checked against the node they came from (see [`ConManager::source_of_qpn`]).
    by_qpn: RwLock<HashMap<u32, (NodeId, bool)>>,
    /// Closed queue pairs still in `by_qpn`, oldest first.
    retired_qpns: Mutex<VecDeque<u32>>,
    discovered: Mutex<HashSet<NodeId>>,
    jobs: IndexQueue,
    create_requested: Mutex<HashSet<NodeId>>,
    changed: (Mutex<u64>, Condvar),
    socket: UdpSocket,
    local_addr: SocketAddr,
    events: EventSink,
    running: AtomicBool,
    /// Fault injection: drop every n-th outgoing packet (0 = none).
    drop_every: std::sync::atomic::AtomicU32,
    /// Fault injection: the source node id our immediate data claims
    /// (`u32::MAX`: our own id), to test that peers refuse it.
    forged_imm_source: std::sync::atomic::AtomicU32,
    /// Per node: (our queue pair, bytes handled beyond the last confirmation),
    /// told to the peer in our `Leave` when we shut down.
    handled_on_leave: Mutex<HashMap<NodeId, (u32, u64)>>,
    /// Counters.
    pub stats: ConStats,
    /// Sealing and checking of packets (pre-shared key), see [`super::auth`].
    auth: Auth,
    /// When the manager started (the base of `last_received_ms`).
    epoch: Instant,
    /// Per node: when data last arrived from it (ms since `epoch`). A
    /// connection busy receiving is in use although we send nothing on it.
    last_received_ms: Box<[AtomicU64]>,
    /// Recently finished connections (node, peer instance, peer QPN, our
    /// QPN): a peer still in its two-phase close (ours was forced, or our
    /// `Done` got lost) is answered with `Done` instead of waiting for its
    /// deadline.
    finished: Mutex<VecDeque<(NodeId, u32, u32, u32)>>,
    /// Nodes on another fabric instance: connects to them fail at once.
    foreign: foreign::ForeignPeers,
}

impl<F: Fabric> std::fmt::Debug for ConManager<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConManager(node {}, {})", self.me, self.local_addr)
    }
}

/// A connection in the two-phase orderly close (see [`super::proto`]): its
/// queue pair stays up until our work requests are all acknowledged and the
/// peer says the same of its own.
struct Closing<F: Fabric> {
    conn: Arc<Connection<F>>,
    /// Our `Done` went out: nothing of ours in flight, nothing more posted.
    done_sent: bool,
    /// The peer's `Done` arrived.
    peer_done: bool,
    /// When `Close` or `Done` was last sent (for retransmission).
    last_sent: Instant,
    /// When the queue pair goes down whatever the peer says.
    deadline: Instant,
}

impl<F: Fabric> Closing<F> {
    /// The close the peer's packet about its queue pair `peer_qpn` and our `local_qpn` is for.
    fn is_for(&self, node: NodeId, instance: u32, peer_qpn: u32, local_qpn: u32) -> bool {
        self.conn.node() == node && self.conn.is_peer(instance, peer_qpn) && self.conn.local_qpn() == local_qpn
    }
}

/// State only the job thread touches.
struct JobState<F: Fabric> {
    last_exchange: HashMap<NodeId, Instant>,
    pending_since: HashMap<NodeId, Instant>,
    /// Orderly closes in progress.
    closing: Vec<Closing<F>>,
    /// None until the first discovery round (which runs at once).
    last_discovery: Option<Instant>,
    buf: Vec<u8>,
}

impl<F: Fabric> ConManager<F> {
    /// Binds the UDP socket; the job thread is started with [`ConManager::run`].
    pub fn new(cfg: Arc<EngineConfig>, queues: Arc<QueueSet<F>>, events: EventSink) -> std::io::Result<Self> {
        let socket = UdpSocket::bind(cfg.listen)?;
        Self::with_socket(cfg, queues, events, socket)
    }

    /// As [`ConManager::new`] with a socket the caller bound (to `cfg.listen`).
    pub fn with_socket(
        cfg: Arc<EngineConfig>,
        queues: Arc<QueueSet<F>>,
        events: EventSink,
        socket: UdpSocket,
    ) -> std::io::Result<Self> {
        socket.set_read_timeout(Some(Duration::from_millis(20)))?;
        let local_addr = socket.local_addr()?;
        let me = cfg.node_id;
        Ok(ConManager {
            me,
            instance: crate::util::random_u32() | 1,
            queues,
            nodes: NodeTable::default(),
            table: RwLock::new(HashMap::new()),
            by_qpn: RwLock::new(HashMap::new()),
            retired_qpns: Mutex::new(VecDeque::new()),
            discovered: Mutex::new(HashSet::new()),
            jobs: IndexQueue::new(4096),
            create_requested: Mutex::new(HashSet::new()),
            changed: (Mutex::new(0), Condvar::new()),
            socket,
            local_addr,
            events,
            running: AtomicBool::new(true),
            drop_every: std::sync::atomic::AtomicU32::new(0),
            forged_imm_source: std::sync::atomic::AtomicU32::new(u32::MAX),
            handled_on_leave: Mutex::new(HashMap::new()),
            stats: ConStats::default(),
            auth: Auth::new(cfg.auth_key.clone()),
            epoch: Instant::now(),
            last_received_ms: (0..=u16::MAX).map(|_| AtomicU64::new(0)).collect(),
            finished: Mutex::new(VecDeque::new()),
            foreign: foreign::ForeignPeers::default(),
            cfg,
        })
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.me
    }
    /// This engine's instance id (random per start).
    pub fn instance(&self) -> u32 {
        self.instance
    }
    /// The bound UDP address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
    /// The shared queues.
    pub fn queues(&self) -> &Arc<QueueSet<F>> {
        &self.queues
    }

    /// Adds a node. Adding it again with the same address does nothing; a
    /// different address for a known id, this node's own id or address, or
    /// the invalid id are refused (remove the node first to move it).
    pub fn add_node(&self, id: NodeId, addr: SocketAddr) -> Result<(), String> {
        if id == self.me {
            return Err(format!(
                "node id {id} ({}) is this node's own id (node_id); it cannot be added as a peer",
                id.0
            ));
        }
        if addr == self.local_addr {
            return Err(format!("node {id}: address {addr} is this node's own listen address"));
        }
        self.nodes.add_unique(id, addr)
    }

    /// Removes a node: its connection is closed and `Invalidated` reported.
    pub fn remove_node(&self, id: NodeId) -> bool {
        let known = self.nodes.remove(id).is_some();
        if known {
            self.post_job(JOB_NODE_REMOVED, id);
        }
        known
    }

    /// Nodes in the table.
    pub fn nodes(&self) -> Vec<(NodeId, SocketAddr)> {
        self.nodes.all()
    }

    /// The established connection to `node`, if there is one. Never blocks
    /// on the network.
    pub fn established(&self, node: NodeId) -> Option<Arc<Connection<F>>> {
        let t = self.table.read().unwrap_or_else(|p| p.into_inner());
        t.get(&node).filter(|c| c.is_established()).cloned()
    }

    /// The node an open local queue pair belongs to.
    pub fn node_of_qpn(&self, qpn: u32) -> Option<NodeId> {
        let m = self.by_qpn.read().unwrap_or_else(|p| p.into_inner());
        m.get(&qpn).filter(|e| e.1).map(|e| e.0)
    }

    /// The node a local queue pair belongs or recently belonged to (data it
    /// delivered before it closed is still polled afterwards), and whether it
    /// is still open.
    pub fn source_of_qpn(&self, qpn: u32) -> Option<(NodeId, bool)> {
        self.by_qpn.read().unwrap_or_else(|p| p.into_inner()).get(&qpn).copied()
    }

    /// Number of connections in the table (any state).
    pub fn connection_count(&self) -> usize {
        self.table.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The established connection to `node`, creating it if needed and
    /// waiting up to `timeout`.
    pub fn connect(&self, node: NodeId, timeout: Duration) -> Result<Arc<Connection<F>>, ConError> {
        if node == self.me {
            return Err(ConError::SelfConnection);
        }
        if self.nodes.get(node).is_none() {
            return Err(ConError::UnknownNode(node));
        }
        let start = Instant::now();
        loop {
            if !self.running.load(Ordering::Acquire) {
                return Err(ConError::ShutDown);
            }
            if let Some(c) = self.established(node) {
                return Ok(c);
            }
            if let Some(e) = self.foreign_error(node) {
                return Err(e);
            }
            self.request_create(node)?;
            let waited = start.elapsed();
            // Refused packets name the reason; a node with a key trusts that
            // only at the deadline (a forged unsealed packet must not fail
            // its connects early), a node without a key at once.
            let recent = start.checked_sub(self.cfg.discovery_interval * 3).unwrap_or(start);
            if let Some(problem) = self.auth.problem_with(node, recent) {
                if waited >= timeout || !self.auth.keyed() {
                    return Err(ConError::Auth { node, problem });
                }
            }
            if waited >= timeout {
                return Err(ConError::Timeout { node, waited });
            }
            let (m, cv) = &self.changed;
            let g = lock(m);
            let wait = (timeout - waited).min(Duration::from_millis(50));
            drop(cv.wait_timeout(g, wait).unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// The receive thread got data from `node` (keeps its connection from
    /// being evicted as idle).
    pub fn received_from(&self, node: u16) {
        self.last_received_ms[usize::from(node)].store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// How long ago the connection to `node` was used in either direction.
    fn idle_for(&self, c: &Connection<F>) -> std::time::Duration {
        let received = self.epoch
            + std::time::Duration::from_millis(self.last_received_ms[usize::from(c.node().0)].load(Ordering::Relaxed));
        c.last_used().max(received).elapsed()
    }

    /// The send thread saw work requests of an orderly closed connection to
    /// `node` fail: reports [`NodeEvent::Lost`] (from the job thread).
    pub fn report_lost(&self, node: NodeId) {
        if !self.post_job(JOB_LOST, node) {
            log::error!("node {}: job queue full; the loss of data to {node} is not reported", self.me);
        }
    }

    /// Asks the job thread to create a connection (once per node until it
    /// exists); does not wait.
    pub fn request_create(&self, node: NodeId) -> Result<(), ConError> {
        if lock(&self.create_requested).insert(node) && !self.post_job(JOB_CREATE, node) {
            lock(&self.create_requested).remove(&node);
            return Err(ConError::Busy);
        }
        Ok(())
    }

    /// Closes the connection to `node`: with `force`, at once; otherwise
    /// after outstanding handles are returned (bounded by the connect timeout).
    pub fn close(&self, node: NodeId, force: bool) -> bool {
        self.post_job(if force { JOB_CLOSE_FORCE } else { JOB_CLOSE }, node)
    }

    /// Closes the connection to `node` at once if `qpn` is its open queue
    /// pair (not a newer one). True if a close was started.
    pub fn close_queue_pair(&self, node: NodeId, qpn: u32) -> bool {
        self.node_of_qpn(qpn) == Some(node) && self.close(node, true)
    }

    fn post_job(&self, kind: u32, node: NodeId) -> bool {
        let ok = self.jobs.push((kind << 16) | u32::from(node.0)).is_ok();
        if ok {
            let _ = self.socket.send_to(&KICK, self.local_addr);
        } else {
            self.stats.jobs_dropped.fetch_add(1, Ordering::Relaxed);
            log::error!("node {}: job queue full, job {kind} for node {node} dropped", self.me);
        }
        ok
    }

    /// Stops the job thread's loop.
    pub fn shutdown(&self) {
        self.running.store(false, Ordering::Release);
        let _ = self.jobs.push(JOB_WAKE << 16);
        let _ = self.socket.send_to(&KICK, self.local_addr);
        self.notify();
    }

    fn notify(&self) {
        let (m, cv) = &self.changed;
        *lock(m) += 1;
        cv.notify_all();
    }

    /// Fault injection for tests: our immediate data claims to come from
    /// `source` (None: from us, the default).
    pub fn set_forged_imm_source(&self, source: Option<NodeId>) {
        self.forged_imm_source.store(source.map_or(u32::MAX, |n| u32::from(n.0)), Ordering::Relaxed);
    }

    /// The source node id the send thread puts into immediate data.
    pub(crate) fn imm_source(&self) -> u16 {
        u16::try_from(self.forged_imm_source.load(Ordering::Relaxed)).unwrap_or(self.me.0)
    }

    /// Before shutting down: of what `node` sent on our queue pair `qpn`, the
    /// application handled `bytes` beyond its last flow-control confirmation.
    /// Our `Leave` carries it, so the peer knows exactly what was not handled.
    pub fn set_handled_on_leave(&self, node: NodeId, qpn: u32, bytes: u64) {
        lock(&self.handled_on_leave).insert(node, (qpn, bytes));
    }

    fn leave(&self, node: NodeId, qpn: u32) -> Body {
        let handled = lock(&self.handled_on_leave).get(&node).filter(|e| e.0 == qpn).map_or(LEAVE_UNKNOWN, |e| e.1);
        Body::Leave { qpn, handled }
    }

    /// Fault injection for tests: drop every `n`-th outgoing packet (0 = none).
    pub fn set_packet_loss(&self, n: u32) {
        self.drop_every.store(n, Ordering::Relaxed);
    }

    fn send(&self, node: NodeId, body: Body, buf: &mut Vec<u8>) {
        let Some(addr) = self.nodes.get(node) else { return };
        let every = self.drop_every.load(Ordering::Relaxed);
        if every != 0 && (self.stats.packets_out.fetch_add(1, Ordering::Relaxed) + 1) % u64::from(every) == 0 {
            return;
        }
        self.auth.encode(&Packet { src: self.me, dst: node, instance: self.instance, body }, buf);
        match self.socket.send_to(buf, addr) {
            Ok(_) if every == 0 => {
                self.stats.packets_out.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(e) => log::debug!("node {}: UDP send to {node} at {addr} failed: {e}", self.me),
        }
    }

    /// The job thread's loop; returns after [`ConManager::shutdown`], having
    /// closed every connection.
    pub fn run(&self) {
        let mut st = JobState::<F> {
            last_exchange: HashMap::new(),
            pending_since: HashMap::new(),
            closing: Vec::new(),
            last_discovery: None,
            buf: Vec::with_capacity(MAX_PACKET),
        };
        let mut rx = [0u8; MAX_PACKET + 1];
        while self.running.load(Ordering::Acquire) {
            while let Some(job) = self.jobs.pop() {
                self.handle_job(job, &mut st);
            }
            match self.socket.recv_from(&mut rx) {
                Ok((n, from)) => self.handle_datagram(&rx[..n], from, &mut st),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => log::debug!("node {}: UDP receive failed: {e}", self.me),
            }
            self.periodic(&mut st);
        }
        // Shutdown: close everything, without waiting for handles.
        let all: Vec<NodeId> = self.table.read().unwrap_or_else(|p| p.into_inner()).keys().copied().collect();
        for node in all {
            self.close_now(node, true, false, &mut st);
        }
        for e in st.closing.drain(..) {
            // The peer waits for our `Done`: tell it we are gone instead.
            let body = self.leave(e.conn.node(), e.conn.local_qpn());
            self.send(e.conn.node(), body, &mut st.buf);
            let _ = e.conn.qp().set_error();
            e.conn.set_state(ConState::Closed);
        }
        self.notify();
    }

    fn handle_job(&self, job: u32, st: &mut JobState<F>) {
        let node = NodeId((job & 0xFFFF) as u16);
        match job >> 16 {
            JOB_CREATE => {
                lock(&self.create_requested).remove(&node);
                let exists = self.table.read().unwrap_or_else(|p| p.into_inner()).contains_key(&node);
                if !exists && self.nodes.get(node).is_some() && self.foreign.get(node).is_none() {
                    if let Some(c) = self.create(node, st) {
                        self.send_exchange(&c, st);
                    }
                }
            }
            JOB_CLOSE => self.close_now(node, false, true, st),
            JOB_CLOSE_FORCE => self.close_now(node, true, false, st),
            JOB_LOST => (self.events)(NodeEvent::Lost(node)),
            JOB_NODE_REMOVED => {
                self.close_now(node, true, false, st);
                lock(&self.discovered).remove(&node);
                self.foreign.forget(node);
                (self.events)(NodeEvent::Invalidated(node));
            }
            _ => {}
        }
    }

    /// Creates a pending connection (evicting the least recently used
    /// established ones at the limit) and puts it into the table.
    ///
    /// Connections still being set up are never evicted: with more nodes
    /// talking at once than the limit allows, evicting them livelocked (each
    /// new exchange evicted another node's pending connection, which was
    /// re-requested and evicted the next). So the limit counts established
    /// connections; the ones coming up may exceed it until they are used.
    fn create(&self, node: NodeId, st: &mut JobState<F>) -> Option<Arc<Connection<F>>> {
        while self.connection_count() >= self.cfg.max_connections as usize {
            let lru = {
                let t = self.table.read().unwrap_or_else(|p| p.into_inner());
                t.values()
                    .filter(|c| c.state() == ConState::Established && self.idle_for(c) >= EVICT_IDLE)
                    .min_by_key(|c| c.last_used())
                    .map(|c| c.node())
            };
            let Some(victim) = lru else { break };
            log::info!("node {}: connection limit {} reached, evicting {victim}", self.me, self.cfg.max_connections);
            self.close_now(victim, false, true, st);
        }
        let q = &self.queues;
        let made = (|| -> Result<Arc<Connection<F>>, FabricError> {
            let qp = q.fabric.create_qp(&q.send_cq, &q.recv_cq, &q.srq, q.caps)?;
            let ring = SendRing::new(&q.fabric, self.cfg.send_ring_size)?;
            Ok(Arc::new(Connection::new(node, qp, ring)))
        })();
        match made {
            Ok(c) => {
                c.touch();
                self.by_qpn.write().unwrap_or_else(|p| p.into_inner()).insert(c.qp().qp_num(), (node, true));
                self.table.write().unwrap_or_else(|p| p.into_inner()).insert(node, c.clone());
                st.pending_since.insert(node, Instant::now());
                self.stats.created.fetch_add(1, Ordering::Relaxed);
                Some(c)
            }
            Err(e) => {
                log::error!("node {}: cannot create a connection to {node}: {e}", self.me);
                None
            }
        }
    }

    fn send_exchange(&self, c: &Connection<F>, st: &mut JobState<F>) {
        st.last_exchange.insert(c.node(), Instant::now());
        let established = c.state() == ConState::Established;
        let body = Body::Exchange { endpoint: c.endpoint(), peer_qpn: c.peer_qpn(), established };
        self.send(c.node(), body, &mut st.buf);
    }

    /// Removes the connection from the table and closes it; `orderly`: a
    /// close on purpose (reported as `Closed`), not a failure (`Disconnected`).
    /// Without `force` the close is two-phase (see [`Closing`]).
    fn close_now(&self, node: NodeId, force: bool, orderly: bool, st: &mut JobState<F>) {
        let event = if orderly { NodeEvent::Closed(node) } else { NodeEvent::Disconnected(node) };
        self.close_reporting(node, force, orderly, event, st);
    }

    /// [`Self::close_now`], reporting `event` if the connection was established.
    fn close_reporting(&self, node: NodeId, force: bool, orderly: bool, event: NodeEvent, st: &mut JobState<F>) {
        let Some(c) = self.table.write().unwrap_or_else(|p| p.into_inner()).remove(&node) else { return };
        st.last_exchange.remove(&node);
        st.pending_since.remove(&node);
        let was_established = c.state() == ConState::Established;
        // From here the send thread posts nothing new on it (`begin_posting`).
        c.set_state(ConState::Closing);
        if c.peer_qpn() != 0 {
            let qpn = c.qp().qp_num();
            let body = if orderly { Body::Close { qpn } } else { self.leave(node, qpn) };
            self.send(node, body, &mut st.buf);
            if orderly && force {
                // Our queue pair goes down now: the peer need not wait for anything of ours.
                self.send(node, Body::Done { qpn, peer_qpn: c.peer_qpn() }, &mut st.buf);
            }
        }
        if force || c.peer_qpn() == 0 {
            // Forced, or never connected: nothing to wait for on the wire.
            self.finish_close(&c);
        } else {
            let now = Instant::now();
            let deadline = now + self.cfg.connect_timeout;
            st.closing.push(Closing { conn: c, done_sent: false, peer_done: false, last_sent: now, deadline });
        }
        self.stats.closed.fetch_add(1, Ordering::Relaxed);
        if was_established {
            if !orderly {
                lock(&self.discovered).remove(&node);
            }
            (self.events)(event);
        }
        self.notify();
    }

    fn finish_close(&self, c: &Arc<Connection<F>>) {
        // A queue pair still in RESET (the peer never answered) has nothing
        // posted and cannot go to ERROR; it is just destroyed.
        let result = if c.qp().state() == QpState::Reset { Ok(()) } else { c.qp().set_error() };
        if let Err(e) = result {
            log::warn!("node {}: moving the queue pair to {} to ERROR failed: {e}", self.me, c.node());
        }
        c.set_state(ConState::Closed);
        self.retire_qpn(c.qp().qp_num(), c.node());
        if c.peer_qpn() != 0 {
            let mut f = lock(&self.finished);
            if f.len() == FINISHED_MEMORY {
                f.pop_front();
            }
            f.push_back((c.node(), c.peer_instance(), c.peer_qpn(), c.local_qpn()));
        }
    }

    /// Marks a closed queue pair; the oldest of more than [`RETIRED_QPNS`] are forgotten.
    fn retire_qpn(&self, qpn: u32, node: NodeId) {
        let mut m = self.by_qpn.write().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = m.get_mut(&qpn).filter(|e| e.0 == node) {
            e.1 = false;
        }
        let mut r = lock(&self.retired_qpns);
        r.push_back(qpn);
        while r.len() > RETIRED_QPNS {
            let old = r.pop_front().unwrap_or_default();
            // Only if it was not reused by a newer connection meanwhile.
            if m.get(&old).is_some_and(|e| !e.1) {
                m.remove(&old);
            }
        }
    }

    /// Our queue pair that was connected to `node`'s `peer_qpn`, if it finished recently.
    fn finished_peer_of(&self, node: NodeId, instance: u32, peer_qpn: u32) -> Option<u32> {
        let f = lock(&self.finished);
        f.iter().rev().find(|e| e.0 == node && e.1 == instance && e.2 == peer_qpn).map(|e| e.3)
    }

    fn handle_datagram(&self, data: &[u8], from: SocketAddr, st: &mut JobState<F>) {
        if data == KICK && from.port() == self.local_addr.port() {
            return;
        }
        let (p, seal) = match Packet::decode_any(data) {
            Ok(p) => p,
            Err(e) => {
                self.stats.dropped_malformed.fetch_add(1, Ordering::Relaxed);
                log::debug!("node {}: dropped malformed packet from {from}: {e:?}", self.me);
                return;
            }
        };
        let Some(src_addr) = self.nodes.get(p.src).filter(|_| p.dst == self.me) else {
            self.stats.dropped_foreign.fetch_add(1, Ordering::Relaxed);
            log::debug!("node {}: dropped packet for {} from unknown or foreign node {}", self.me, p.dst, p.src);
            return;
        };
        // Only the node's own address speaks for it: a packet from elsewhere
        // could otherwise forge a restart (new instance id) or a close and
        // tear down a working connection.
        if from.port() != src_addr.port() || !(src_addr.ip().is_unspecified() || from.ip() == src_addr.ip()) {
            self.stats.dropped_spoofed.fetch_add(1, Ordering::Relaxed);
            log::debug!("node {}: dropped packet claiming to be from {} ({src_addr}) sent from {from}", self.me, p.src);
            return;
        }
        match self.auth.check(&p, seal, data, self.instance, Instant::now()) {
            Verdict::Accept => {}
            Verdict::Drop | Verdict::Admitted => return,
            Verdict::Reply(body) => {
                let answered = matches!(body, Body::Response { .. });
                self.send(p.src, body, &mut st.buf);
                if answered {
                    // Admitted now (unless the response is lost): repeat at
                    // once what the challenge stopped instead of at the next retry.
                    self.resend_to(p.src, st);
                }
                return;
            }
        }
        self.stats.packets_in.fetch_add(1, Ordering::Relaxed);
        self.foreign.forget_restarted(p.src, p.instance);
        if lock(&self.discovered).insert(p.src) {
            (self.events)(NodeEvent::Discovered(p.src));
        }
        match p.body {
            Body::Discover => self.send(p.src, Body::DiscoverAck, &mut st.buf),
            Body::DiscoverAck => {}
            Body::Done { qpn, peer_qpn } => self.handle_done(p.src, p.instance, qpn, peer_qpn, st),
            Body::Close { qpn } | Body::Leave { qpn, .. } => {
                let orderly = matches!(p.body, Body::Close { .. });
                // Only the peer instance our queue pair is connected to can close it.
                let current = self
                    .table
                    .read()
                    .unwrap_or_else(|pp| pp.into_inner())
                    .get(&p.src)
                    .is_some_and(|c| c.is_peer(p.instance, qpn));
                let closing = st.closing.iter().position(|e| e.conn.node() == p.src && e.conn.is_peer(p.instance, qpn));
                if current {
                    // Close: the peer posts nothing more and keeps its queue pair
                    // up until we say `Done`, so ours closes in two phases too:
                    // what our send thread already posted still arrives.
                    // Leave: the peer is gone.
                    let event = match p.body {
                        Body::Leave { handled, .. } => {
                            NodeEvent::Left { node: p.src, handled: (handled != LEAVE_UNKNOWN).then_some(handled) }
                        }
                        _ => NodeEvent::Closed(p.src),
                    };
                    self.close_reporting(p.src, !orderly, orderly, event, st);
                } else if let Some(i) = closing {
                    // Both sides closed at once (Close), or the peer went away
                    // during our close (Leave: no `Done` will come).
                    if !orderly {
                        let e = st.closing.swap_remove(i);
                        self.finish_close(&e.conn);
                    }
                } else if let Some(local) = self.finished_peer_of(p.src, p.instance, qpn).filter(|_| orderly) {
                    // Ours is gone already (forced, or finished and our `Done` was
                    // lost): the peer waits for our `Done`.
                    self.send(p.src, Body::Done { qpn: local, peer_qpn: qpn }, &mut st.buf);
                } else {
                    self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
                    log::debug!("node {}: dropped close of qpn {qpn} from {} (no such connection)", self.me, p.src);
                }
            }
            Body::Exchange { endpoint, .. } if endpoint.sim_network != self.sim_network() => {
                self.refuse_exchange(p.src, p.instance, endpoint.sim_network, st)
            }
            Body::Exchange { endpoint, peer_qpn, established } => {
                self.handle_exchange(p.src, p.instance, endpoint, peer_qpn, established, st)
            }
            Body::WrongFabric { sim_network } => self.handle_wrong_fabric(p.src, p.instance, sim_network, st),
            Body::Challenge { .. } | Body::Response { .. } => {} // consumed by `auth`
        }
    }

    /// Repeats the packet a challenge from `node` may have stopped: the
    /// exchange of a connection coming up, or discovery.
    fn resend_to(&self, node: NodeId, st: &mut JobState<F>) {
        let unfinished = self.table.read().unwrap_or_else(|p| p.into_inner()).get(&node).cloned();
        match unfinished {
            Some(c) if matches!(c.state(), ConState::Pending | ConState::Connected) => self.send_exchange(&c, st),
            _ if !self.is_discovered(node) => self.send(node, Body::Discover, &mut st.buf),
            _ => {}
        }
    }

    /// The peer's `Done` for its queue pair `qpn` connected to our `local_qpn`.
    fn handle_done(&self, node: NodeId, instance: u32, qpn: u32, local_qpn: u32, st: &mut JobState<F>) {
        if let Some(e) = st.closing.iter_mut().find(|e| e.is_for(node, instance, qpn, local_qpn)) {
            e.peer_done = true; // `periodic`, right after this packet, finishes it if ours is sent
            return;
        }
        let current = self
            .table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&node)
            .is_some_and(|c| c.is_peer(instance, qpn) && c.local_qpn() == local_qpn);
        if current {
            // Its `Close` was lost: `Done` implies it.
            self.close_now(node, false, true, st);
            if let Some(e) = st.closing.last_mut() {
                e.peer_done = true;
            }
        } else if self.node_of_qpn(local_qpn).is_none() {
            // We finished this close already and our `Done` was lost: repeat it.
            self.send(node, Body::Done { qpn: local_qpn, peer_qpn: qpn }, &mut st.buf);
        } else {
            self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Advances the orderly closes: our `Done` once nothing of ours is in
    /// flight, retransmission while the peer has not answered, the queue
    /// pair down once both are done (or at the deadline).
    fn progress_closes(&self, now: Instant, st: &mut JobState<F>) {
        let JobState { closing, buf, .. } = st;
        closing.retain_mut(|e| {
            let (node, qpn, peer_qpn) = (e.conn.node(), e.conn.local_qpn(), e.conn.peer_qpn());
            if !e.done_sent && e.conn.inflight() == 0 {
                e.done_sent = true;
                e.last_sent = now;
                self.send(node, Body::Done { qpn, peer_qpn }, buf);
            } else if !e.peer_done && now - e.last_sent >= self.cfg.exchange_retry {
                e.last_sent = now;
                self.send(node, if e.done_sent { Body::Done { qpn, peer_qpn } } else { Body::Close { qpn } }, buf);
            }
            if e.done_sent && e.peer_done {
                self.stats.closes_drained.fetch_add(1, Ordering::Relaxed);
                self.finish_close(&e.conn);
                return false;
            }
            if now >= e.deadline {
                log::warn!(
                    "node {}: orderly close of the connection to {node} unfinished after {:?} \
                     ({} work requests of ours in flight, peer {}); taking it down",
                    self.me,
                    self.cfg.connect_timeout,
                    e.conn.inflight(),
                    if e.peer_done { "done" } else { "silent" }
                );
                self.stats.closes_timed_out.fetch_add(1, Ordering::Relaxed);
                self.finish_close(&e.conn);
                return false;
            }
            true
        });
    }

    fn handle_exchange(
        &self,
        node: NodeId,
        instance: u32,
        remote: crate::fabric::QpEndpoint,
        peer_qpn: u32,
        peer_established: bool,
        st: &mut JobState<F>,
    ) {
        // A restarted peer's old queue pairs are gone: their `Done` never comes.
        st.closing.retain(|e| {
            let old = e.conn.node() == node && e.conn.peer_instance() != instance;
            if old {
                self.finish_close(&e.conn);
            }
            !old
        });
        let current = self.table.read().unwrap_or_else(|p| p.into_inner()).get(&node).cloned();
        if current.is_none() && peer_qpn != 0 {
            // About a queue pair of ours that is closed or closing (e.g. the
            // last answer of its set-up, overtaken by the close): building a
            // new connection on it would connect to the peer's closing one.
            // A peer that wants a new connection sends peer_qpn 0.
            self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(c) = &current {
            let restarted = c.peer_instance() != 0 && c.peer_instance() != instance;
            let other_qp = c.state() != ConState::Pending && c.peer_qpn() != remote.qpn;
            if other_qp && !restarted && peer_qpn != 0 {
                // The peer's queue pair is already connected to one of ours: an
                // exchange of an abandoned queue pair (delayed or retransmitted), or
                // both sides replaced at once. Replacing on it chased the peer
                // forever under connection churn (each replacement answered with a
                // new queue pair); only a fresh queue pair (peer_qpn 0) replaces.
                self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
                if peer_qpn == c.qp().qp_num() {
                    // Crossed: its new queue pair points at ours, ours at its old one.
                    // Neither can be re-targeted: drop ours; the next use starts fresh.
                    log::info!("node {}: crossed queue pairs with {node} — closing ours", self.me);
                    self.close_now(node, true, true, st);
                }
                return;
            }
            if restarted || other_qp {
                log::info!(
                    "node {}: peer {node} {} — replacing the stale connection",
                    self.me,
                    if restarted { "restarted" } else { "has a new queue pair" }
                );
                // A fresh queue pair from the same instance: it closed ours in order
                // (its close got lost). A restart lost whatever was in flight.
                self.close_now(node, true, !restarted, st);
            }
        }
        // Bind first: a read guard in the match scrutinee would live through
        // `create`, which takes the write lock.
        let existing = self.table.read().unwrap_or_else(|p| p.into_inner()).get(&node).cloned();
        let c = match existing {
            Some(c) => c,
            None => match self.create(node, st) {
                Some(c) => c,
                None => return,
            },
        };
        if c.state() == ConState::Pending {
            if let Err(e) = c.connect(&remote, instance) {
                log::error!("node {}: connecting the queue pair to {node} failed: {e}", self.me);
                self.close_now(node, true, false, st);
                return;
            }
        }
        let was_established = c.state() == ConState::Established;
        if peer_qpn == c.qp().qp_num() && c.state() == ConState::Connected {
            c.set_state(ConState::Established);
            st.pending_since.remove(&node);
            st.last_exchange.remove(&node);
            log::debug!(
                "node {}: connection to {node} established (qpn {} ↔ {})",
                self.me,
                c.qp().qp_num(),
                remote.qpn
            );
            self.notify();
        }
        // Answer until both sides know both are connected: the peer is not
        // connected to our queue pair, we just became established, or the
        // peer does not know yet that we are (our last answer was lost).
        if peer_qpn != c.qp().qp_num() || !was_established || !peer_established {
            self.send_exchange(&c, st);
        }
    }

    fn periodic(&self, st: &mut JobState<F>) {
        let now = Instant::now();
        // Retransmit exchanges of connections not yet established; give up
        // on those pending longer than the connect timeout.
        let unfinished: Vec<Arc<Connection<F>>> = self
            .table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|c| matches!(c.state(), ConState::Pending | ConState::Connected))
            .cloned()
            .collect();
        for c in unfinished {
            let node = c.node();
            if st.pending_since.get(&node).is_some_and(|t| now - *t > self.cfg.connect_timeout * 3) {
                log::warn!("node {}: connection to {node} not established, giving up", self.me);
                self.close_now(node, true, false, st);
                continue;
            }
            if st.last_exchange.get(&node).is_none_or(|t| now - *t >= self.cfg.exchange_retry) {
                self.send_exchange(&c, st);
            }
        }
        self.progress_closes(now, st);
        // Discovery of nodes not heard from.
        if st.last_discovery.is_none_or(|t| now - t >= self.cfg.discovery_interval) {
            st.last_discovery = Some(now);
            let known = lock(&self.discovered).clone();
            for (node, _) in self.nodes.all() {
                if !known.contains(&node) {
                    self.send(node, Body::Discover, &mut st.buf);
                }
            }
        }
    }

    /// The counters by name (`packets_in`, `dropped_malformed`, ...), as in
    /// the engine's statistics map.
    pub fn stats_map(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut m = vec![
            ("connections", self.connection_count() as u64),
            ("packets_in", l(&s.packets_in)),
            ("packets_out", l(&s.packets_out)),
            ("dropped_malformed", l(&s.dropped_malformed)),
            ("dropped_foreign", l(&s.dropped_foreign)),
            ("dropped_spoofed", l(&s.dropped_spoofed)),
            ("dropped_stale", l(&s.dropped_stale)),
            ("connections_created", l(&s.created)),
            ("connections_closed", l(&s.closed)),
            ("closes_drained", l(&s.closes_drained)),
            ("closes_timed_out", l(&s.closes_timed_out)),
            ("jobs_dropped", l(&s.jobs_dropped)),
            ("foreign_fabric", l(&s.foreign_fabric)),
        ];
        m.extend(self.auth.stats_map());
        m
    }

    /// True if `node` answered a packet since it was last lost.
    pub fn is_discovered(&self, node: NodeId) -> bool {
        lock(&self.discovered).contains(&node)
    }
}
