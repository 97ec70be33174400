//! The connection manager (paper §7.1): its API (the job thread's loop is in `job_loop`).
//! One job thread owns every change of the connection table. Other threads
//! read the table (established connections, lock-shared) and post jobs
//! into a bounded lock-free queue.
//!
//! Queue pair exchange over UDP converges to one connection per node pair,
//! also when both ends start at once: each side has at most one queue pair
//! per peer and connects it to whatever endpoint the peer announces. The
//! concerns live in child modules:
//! - `exchange`: creating connections, the exchange state machine, eviction;
//! - `close`: the ways a connection ends (`CloseKind`), the
//!   two-phase orderly close and the record of recent closes;
//! - `wire`: sending and receiving packets, their validation and the
//!   authentication hook;
//! - `foreign`: peers on another fabric instance;
//! - `discovery`: discovery by address (candidate addresses, probes and
//!   their answers, protocol 7);
//! - `job`: the jobs other threads post; `job_loop`: the job thread's
//!   loop and timers; `qpns`: which node a local queue pair belongs to.

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::auth::Auth;
use super::auth::AuthStats;
use super::config::ConConfig;
use super::connection::{ConState, Connection};
use super::error::ConError;
use super::event::EventSink;
use super::node::{NodeError, NodeId, NodeTable};
use super::stats::ConStats;
use crate::fabric::{Fabric, QpCaps};
use crate::sys::counter::Part;
use crate::sys::doorbell::Doorbell;
use crate::sys::queue::IndexQueue;
use crate::util::lock;

mod close;
mod discovery;
mod exchange;
mod foreign;
mod job;
mod job_loop;
mod qpns;
mod wire;

use close::RecentCloses;
use job::Job;
use job_loop::JobState;

/// Capacity of the job queue.
const JOB_QUEUE: usize = 4096;

/// Longest sleep of the job thread: it wakes earlier at its next timer
/// (exchange retry, close phase, discovery round), a packet, or a job (jobs
/// and new addresses wake it through [`ConManager::kick`]).
const MAX_SLEEP: Duration = Duration::from_secs(1);

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

/// The connection manager of one engine.
pub struct ConManager<F: Fabric> {
    me: NodeId,
    instance: u32,
    cfg: ConConfig,
    queues: Arc<QueueSet<F>>,
    nodes: NodeTable,
    table: RwLock<HashMap<NodeId, Arc<Connection<F>>>>,
    /// Local QPN → node, also for recently closed queue pairs.
    qpns: qpns::QpnIndex,
    discovered: Mutex<HashSet<NodeId>>,
    jobs: IndexQueue,
    create_requested: Mutex<HashSet<NodeId>>,
    /// Per node: callers waiting in [`ConManager::connect`]. Their connection
    /// is not evicted before they got it.
    waiting: Mutex<HashMap<NodeId, u32>>,
    changed: (Mutex<u64>, Condvar),
    state_changes: Arc<AtomicU64>, // bumped by every `Connection::set_state`
    /// The send thread's doorbell (see [`ConManager::wake_on_change`]).
    on_change: std::sync::OnceLock<Arc<Doorbell>>,
    socket: UdpSocket,
    local_addr: SocketAddr,
    events: EventSink,
    running: AtomicBool,
    /// Set when the owner begins to close: callers waiting in
    /// [`ConManager::connect`] give up at once (the close waits for them).
    refusing_connects: AtomicBool,
    /// Fault injection: drop every n-th outgoing packet (0 = none).
    drop_every: AtomicU32,
    /// Fault injection: the source node id our immediate data claims
    /// (`u32::MAX`: our own id), to test that peers refuse it.
    forged_imm_source: AtomicU32,
    /// Per node: (our queue pair, bytes handled beyond the last confirmation),
    /// told to the peer in our `Leave` when we shut down.
    handled_on_leave: Mutex<HashMap<NodeId, (u32, u64)>>,
    /// Counters (in an engine: slots of its counters table).
    pub stats: Part<ConStats>,
    /// Sealing and checking of packets (pre-shared key), see [`super::auth`].
    auth: Auth,
    /// When the manager started (the base of `last_received_ms`).
    epoch: Instant,
    /// Per node: when data last arrived from it (ms since `epoch`). A
    /// connection busy receiving is in use although we send nothing on it.
    last_received_ms: Box<[AtomicU64]>,
    /// Recently finished connections, to answer a peer's late `Close`.
    recent_closes: RecentCloses,
    /// Nodes on another fabric instance: connects to them fail at once.
    foreign: foreign::ForeignPeers,
    /// Candidate addresses (discovery by address).
    candidates: discovery::Candidates,
}

impl<F: Fabric> std::fmt::Debug for ConManager<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConManager(node {}, {})", self.me, self.local_addr)
    }
}

impl<F: Fabric> ConManager<F> {
    /// Binds the UDP socket; the job thread is started with [`ConManager::run`].
    pub fn new(cfg: ConConfig, queues: Arc<QueueSet<F>>, events: EventSink) -> std::io::Result<Self> {
        let socket = UdpSocket::bind(cfg.listen)?;
        Self::with_socket(cfg, queues, events, socket)
    }

    /// As [`ConManager::new`] with a socket the caller bound (to `cfg.listen`).
    pub fn with_socket(
        cfg: ConConfig,
        queues: Arc<QueueSet<F>>,
        events: EventSink,
        socket: UdpSocket,
    ) -> std::io::Result<Self> {
        Self::with_counters(cfg, queues, events, socket, Part::default(), Part::default())
    }

    /// As [`ConManager::with_socket`], counting in `stats` and `auth_stats`
    /// (the engine's counters table).
    pub fn with_counters(
        cfg: ConConfig,
        queues: Arc<QueueSet<F>>,
        events: EventSink,
        socket: UdpSocket,
        stats: Part<ConStats>,
        auth_stats: Part<AuthStats>,
    ) -> std::io::Result<Self> {
        socket.set_read_timeout(Some(MAX_SLEEP))?;
        let local_addr = socket.local_addr()?;
        Ok(ConManager {
            me: cfg.node_id,
            instance: crate::util::random_u32() | 1,
            queues,
            nodes: NodeTable::default(),
            table: RwLock::new(HashMap::new()),
            qpns: qpns::QpnIndex::default(),
            discovered: Mutex::new(HashSet::new()),
            jobs: IndexQueue::new(JOB_QUEUE),
            create_requested: Mutex::new(HashSet::new()),
            waiting: Mutex::new(HashMap::new()),
            changed: (Mutex::new(0), Condvar::new()),
            state_changes: Arc::new(AtomicU64::new(0)),
            on_change: std::sync::OnceLock::new(),
            socket,
            local_addr,
            events,
            running: AtomicBool::new(true),
            refusing_connects: AtomicBool::new(false),
            drop_every: AtomicU32::new(0),
            forged_imm_source: AtomicU32::new(u32::MAX),
            handled_on_leave: Mutex::new(HashMap::new()),
            stats,
            auth: Auth::with_stats(cfg.auth_key.clone(), auth_stats),
            epoch: Instant::now(),
            last_received_ms: (0..=u16::MAX).map(|_| AtomicU64::new(0)).collect(),
            recent_closes: RecentCloses::default(),
            foreign: foreign::ForeignPeers::default(),
            candidates: discovery::Candidates::default(),
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
    ///
    /// An unspecified address (`0.0.0.0`, `::`) is taken, as on NIO, but
    /// names no peer: packets claiming the node are refused (from any
    /// address), none are sent to it and connects to it fail at once
    /// ([`ConError::UnspecifiedAddress`]); logged once when added.
    pub fn add_node(&self, id: NodeId, addr: SocketAddr) -> Result<(), NodeError> {
        if id == self.me {
            return Err(NodeError::OwnId(id));
        }
        if addr == self.local_addr {
            return Err(NodeError::OwnAddress { id, addr });
        }
        let known = self.nodes.get(id) == Some(addr);
        self.nodes.add_unique(id, addr)?;
        if !known {
            // Its discovery is due at the next round, which the sleeping job thread may not have planned.
            self.kick();
        }
        if addr.ip().is_unspecified() && !known {
            log::warn!(
                "node {}: node {id}'s table address {addr} is unspecified: it names no peer (packets claiming \
                 node {id} are refused, none are sent to it)",
                self.me
            );
        }
        Ok(())
    }

    /// Removes a node: its connection is closed and `Invalidated` reported.
    pub fn remove_node(&self, id: NodeId) -> bool {
        let known = self.nodes.remove(id).is_some();
        if known {
            self.post_job(Job::NodeRemoved(id));
        }
        known
    }

    /// Nodes in the table.
    pub fn nodes(&self) -> Vec<(NodeId, SocketAddr)> {
        self.nodes.all()
    }

    /// State changes of its connections so far (Acquire: a new count comes with the new states).
    pub fn state_changes(&self) -> u64 {
        self.state_changes.load(Ordering::Acquire)
    }

    /// The established connection to `node`, if there is one. Never blocks
    /// on the network.
    pub fn established(&self, node: NodeId) -> Option<Arc<Connection<F>>> {
        let t = self.table.read().unwrap_or_else(|p| p.into_inner());
        t.get(&node).filter(|c| c.is_established()).cloned()
    }

    /// The node an open local queue pair belongs to.
    pub fn node_of_qpn(&self, qpn: u32) -> Option<NodeId> {
        self.qpns.node_of_open(qpn)
    }

    /// The flow-control unit `node` told us for the connection of our queue
    /// pair `qpn` (`None`: that is not the node's connection any more).
    pub fn peer_flow_unit(&self, node: NodeId, qpn: u32) -> Option<u64> {
        let t = self.table.read().unwrap_or_else(|p| p.into_inner());
        t.get(&node).filter(|c| c.local_qpn() == qpn).map(|c| c.peer_flow_unit()).filter(|&u| u != 0)
    }

    /// The node a local queue pair belongs or recently belonged to (data it
    /// delivered before it closed is still polled afterwards), and whether it
    /// is still open.
    pub fn source_of_qpn(&self, qpn: u32) -> Option<(NodeId, bool)> {
        self.qpns.source_of(qpn)
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
        match self.nodes.get(node) {
            None => return Err(ConError::UnknownNode(node)),
            Some(addr) if addr.ip().is_unspecified() => return Err(ConError::UnspecifiedAddress { node, addr }),
            Some(_) => {}
        }
        let start = Instant::now();
        let _waiting = Waiting::new(&self.waiting, node);
        // The node's connection as this caller saw it at each wake-up that
        // found it changed (our queue pair, the peer's, the state), for the
        // timeout's debug line: it showed how issue 22's connects starved.
        let mut seen_states: Vec<(Duration, Option<SeenConnection>)> = Vec::new();
        loop {
            // The change count before looking: a change after this point wakes
            // the wait below at once (before, a connection established between
            // the look and the wait was seen only at the 50 ms poll).
            let seen = *lock(&self.changed.0);
            if !self.running.load(Ordering::Acquire) || self.refusing_connects.load(Ordering::Acquire) {
                return Err(ConError::ShutDown);
            }
            if let Some(c) = self.established(node) {
                // The caller is about to use it: not idle (not evicted at once).
                c.touch();
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
            let now_state = self
                .table
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(&node)
                .map(|c| (c.local_qpn(), c.peer_qpn(), c.state()));
            if seen_states.last().is_none_or(|l| l.1 != now_state) && seen_states.len() < 64 {
                seen_states.push((waited, now_state));
            }
            if waited >= timeout {
                log::debug!(
                    "node {}: connect to {node} timed out after {waited:?}; its connection meanwhile \
                     (after, (our qpn, peer qpn, state)): {seen_states:?}; create requested {}, discovered {}",
                    self.me,
                    lock(&self.create_requested).contains(&node),
                    self.is_discovered(node)
                );
                return Err(ConError::Timeout { node, waited });
            }
            let (m, cv) = &self.changed;
            let wait = (timeout - waited).min(Duration::from_millis(50));
            let g = lock(m);
            drop(cv.wait_timeout_while(g, wait, |n| *n == seen).unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// True if a caller waits in [`ConManager::connect`] for `node`.
    fn has_waiters(&self, node: NodeId) -> bool {
        lock(&self.waiting).contains_key(&node)
    }

    /// The receive thread got data from `node` (keeps its connection from
    /// being evicted as idle).
    pub fn received_from(&self, node: u16) {
        self.last_received_ms[usize::from(node)].store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// The send thread saw work requests of an orderly closed connection to
    /// `node` fail: reports [`NodeEvent::Lost`] (from the job thread).
    pub fn report_lost(&self, node: NodeId) {
        if !self.post_job(Job::Lost(node)) {
            log::error!("node {}: job queue full; the loss of data to {node} is not reported", self.me);
        }
    }

    /// Asks the job thread to create a connection (once per node until it
    /// exists); does not wait.
    pub fn request_create(&self, node: NodeId) -> Result<(), ConError> {
        if lock(&self.create_requested).insert(node) && !self.post_job(Job::Create(node)) {
            lock(&self.create_requested).remove(&node);
            return Err(ConError::Busy);
        }
        Ok(())
    }

    /// Closes the connection to `node`: with `force`, at once; otherwise
    /// after outstanding handles are returned (bounded by the connect timeout).
    pub fn close(&self, node: NodeId, force: bool) -> bool {
        self.post_job(if force { Job::CloseForce(node) } else { Job::Close(node) })
    }

    /// Closes the connection to `node` at once if `qpn` is its open queue
    /// pair (not a newer one). True if a close was started.
    pub fn close_queue_pair(&self, node: NodeId, qpn: u32) -> bool {
        self.node_of_qpn(qpn) == Some(node) && self.close(node, true)
    }

    /// Queues `job` and wakes the job thread; false (counted) if the queue is full.
    fn post_job(&self, job: Job) -> bool {
        let ok = self.jobs.push(job.encode()).is_ok();
        if ok {
            self.kick();
        } else {
            self.stats.jobs_dropped.fetch_add(1, Ordering::Relaxed);
            log::error!("node {}: job queue full, {job:?} dropped", self.me);
        }
        ok
    }

    /// Stops the job thread's loop.
    pub fn shutdown(&self) {
        self.running.store(false, Ordering::Release);
        if self.jobs.push(Job::Wake.encode()).is_err() {
            // A full queue wakes the loop as well; it then sees `running` false.
            log::debug!("node {}: job queue full at shutdown", self.me);
        }
        self.kick();
        self.notify();
    }

    /// The owner is closing: [`ConManager::connect`] fails with
    /// [`ConError::ShutDown`] from now on, and callers waiting in it return
    /// at once (the job thread goes on, to say goodbye to the peers).
    pub fn refuse_connects(&self) {
        self.refusing_connects.store(true, Ordering::Release);
        self.notify();
    }

    /// Wakes the callers in [`ConManager::connect`], and the send thread (its connection may be up now).
    fn notify(&self) {
        let (m, cv) = &self.changed;
        *lock(m) += 1;
        cv.notify_all();
        if let Some(d) = self.on_change.get() {
            d.wake_if_sleeping();
        }
    }

    /// Rings `doorbell` (if its thread sleeps) at every change of a connection
    /// (set once, by the engine; a second call changes nothing).
    pub fn wake_on_change(&self, doorbell: Arc<Doorbell>) {
        let _ = self.on_change.set(doorbell);
    }

    /// Fault injection for tests: our immediate data claims to come from `source` (None: us).
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

    /// Fault injection for tests: drop every `n`-th outgoing packet (0 = none).
    pub fn set_packet_loss(&self, n: u32) {
        self.drop_every.store(n, Ordering::Relaxed);
    }

    /// The counters by name (`packets_in`, `dropped_malformed`, ...), as in the engine's statistics map.
    pub fn stats_map(&self) -> Vec<(&'static str, u64)> {
        let mut m = vec![("connections", self.connection_count() as u64)];
        m.extend(self.stats.entries());
        m.extend(self.auth.stats_map());
        m
    }

    /// True if `node` is in the node table.
    pub fn is_known(&self, node: NodeId) -> bool {
        self.nodes.get(node).is_some()
    }

    /// True if `node` answered a packet since it was last lost.
    pub fn is_discovered(&self, node: NodeId) -> bool {
        lock(&self.discovered).contains(&node)
    }
}

/// A connection as a waiting caller saw it: our queue pair, the peer's, the state.
type SeenConnection = (u32, u32, ConState);

/// A caller of [`ConManager::connect`] waiting for a node, counted while it lives.
struct Waiting<'a> {
    map: &'a Mutex<HashMap<NodeId, u32>>,
    node: NodeId,
}

impl<'a> Waiting<'a> {
    fn new(map: &'a Mutex<HashMap<NodeId, u32>>, node: NodeId) -> Self {
        *lock(map).entry(node).or_insert(0) += 1;
        Waiting { map, node }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut m = lock(self.map);
        if let Some(n) = m.get_mut(&self.node) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.node);
            }
        }
    }
}
