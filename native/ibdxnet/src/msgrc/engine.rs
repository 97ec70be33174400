//! The msgrc engine (paper §7.2): one instance per node, with a job thread
//! (connection manager), a send thread and a receive thread, all generic
//! over the fabric. Its user implements [`EngineHandler`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::config::EngineConfig;
use super::recv::RecvThread;
use super::recv_pool::{RecvPool, ReturnError};
use super::send::SendThread;
use super::shared::{CompletedList, IncomingRing};
use crate::abi::{NextWorkPackage, PrevWorkResults};
use crate::con::{ConError, ConManager, Connection, NodeEvent, NodeId, QueueSet};
use crate::fabric::{Fabric, FabricError, QpCaps};
use crate::sys::parking::Parking;

/// The engine's threads, as named in [`EngineHandler::thread_started`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadRole {
    /// Connection manager job thread.
    Job,
    /// Send thread.
    Send,
    /// Receive thread.
    Recv,
}

impl ThreadRole {
    /// Short name used in thread names.
    pub fn name(self) -> &'static str {
        match self {
            ThreadRole::Job => "job",
            ThreadRole::Send => "send",
            ThreadRole::Recv => "recv",
        }
    }
}

/// The engine's user (paper Listings 1–2). Called from the engine's threads.
pub trait EngineHandler: Send + Sync + 'static {
    /// Send thread, once per iteration: the outcome of the previous package
    /// and the confirmations since; returns the next package (flags 0 = none).
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage;
    /// Receive thread: new entries in `ring`; returns how many entries, from
    /// the front, were consumed (their buffers are returned later).
    fn received(&self, ring: &IncomingRing) -> u32;
    /// Job thread: a node was discovered, invalidated or disconnected.
    fn node_event(&self, event: NodeEvent);
    /// Called first on each engine thread (e.g. to attach it to a JVM).
    fn thread_started(&self, _role: ThreadRole) {}
    /// Called last on each engine thread.
    fn thread_stopping(&self, _role: ThreadRole) {}
}

/// Engine counters.
#[derive(Debug, Default)]
pub struct EngineStats {
    /// Send WRs posted.
    pub wrs_sent: AtomicU64,
    /// Payload bytes posted.
    pub bytes_sent: AtomicU64,
    /// Payload bytes received.
    pub bytes_received: AtomicU64,
    /// Receive completions.
    pub messages_received: AtomicU64,
    /// Failed completions and polls.
    pub errors: AtomicU64,
    /// Threads that ended by a panic.
    pub thread_panics: AtomicU64,
    /// Messages whose immediate data named another node than the one of
    /// their queue pair (each closes that connection).
    pub protocol_violations: AtomicU64,
}

impl EngineStats {
    pub(crate) fn add_sent(&self, wrs: u64, bytes: u64) {
        self.wrs_sent.fetch_add(wrs, Ordering::Relaxed);
        self.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
    }
    pub(crate) fn add_received(&self, bytes: u64) {
        self.messages_received.fetch_add(1, Ordering::Relaxed);
        self.bytes_received.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Why an engine could not start.
#[derive(Debug)]
pub enum EngineError {
    /// A configuration field is invalid.
    Config(String),
    /// The fabric failed.
    Fabric(FabricError),
    /// The UDP socket or a thread could not be set up.
    Io(std::io::Error),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Config(e) => write!(f, "invalid configuration: {e}"),
            EngineError::Fabric(e) => write!(f, "fabric: {e}"),
            EngineError::Io(e) => write!(f, "I/O: {e}"),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<FabricError> for EngineError {
    fn from(e: FabricError) -> Self {
        EngineError::Fabric(e)
    }
}

impl From<std::io::Error> for EngineError {
    fn from(e: std::io::Error) -> Self {
        EngineError::Io(e)
    }
}

/// Checks the configuration against the opened device; the error names the
/// configuration key and the device limit.
fn check_device_limits(cfg: &EngineConfig, info: &crate::fabric::DeviceInfo) -> Result<(), String> {
    let check = |key: &str, what: &str, v: u64, max: u32| {
        if v > u64::from(max) {
            Err(format!("{key} = {v} exceeds the device's {what} of {max} (device {})", info.name))
        } else {
            Ok(())
        }
    };
    check("sq_size", "max_qp_wr", cfg.sq_size.into(), info.max_qp_wr)?;
    check("srq_size", "max_srq_wr", cfg.srq_size.into(), info.max_srq_wr)?;
    check("recv_sges_per_wr", "max_srq_sge", cfg.recv_sges_per_wr.into(), info.max_srq_sge)?;
    // The shared send CQ holds every connection's send queue.
    let send_cqe = u64::from(cfg.max_connections) * u64::from(cfg.sq_size) + 64;
    if send_cqe > u64::from(info.max_cqe) {
        return Err(format!(
            "max_connections = {} with sq_size = {}: the send completion queue needs max_connections × sq_size + 64 \
             = {send_cqe} entries, more than the device's max_cqe of {} (device {})",
            cfg.max_connections, cfg.sq_size, info.max_cqe, info.name
        ));
    }
    check("srq_size", "max_cqe", u64::from(cfg.srq_size) + 64, info.max_cqe)?;
    let pool = u64::from(cfg.recv_buffer_count) * u64::from(cfg.recv_buffer_size);
    if pool > info.max_mr_size {
        return Err(format!(
            "recv_buffer_count × recv_buffer_size = {pool} bytes exceeds the device's max_mr_size of {}",
            info.max_mr_size
        ));
    }
    if u64::from(cfg.send_ring_size) > info.max_mr_size {
        return Err(format!(
            "send_ring_size = {} exceeds the device's max_mr_size of {}",
            cfg.send_ring_size, info.max_mr_size
        ));
    }
    Ok(())
}

/// The loop of the send and receive threads: work, then idle by the amount
/// of work done, until the engine stops.
fn agent_loop(running: &AtomicBool, parking: crate::sys::parking::ParkingConfig, mut work: impl FnMut() -> usize) {
    let mut park = Parking::new(parking);
    while running.load(Ordering::Acquire) {
        park.idle(work());
    }
}

/// A running engine. Dropping it shuts it down.
pub struct Engine<F: Fabric> {
    cfg: Arc<EngineConfig>,
    mgr: Arc<ConManager<F>>,
    pool: Arc<RecvPool<F>>,
    stats: Arc<EngineStats>,
    running: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl<F: Fabric> std::fmt::Debug for Engine<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Engine(node {}, {:?})", self.cfg.node_id, self.mgr.local_addr())
    }
}

impl<F: Fabric> Engine<F> {
    /// Opens the fabric, creates the shared queues, binds the UDP socket and
    /// starts the three threads. Nothing starts if the configuration is invalid.
    pub fn start<H: EngineHandler>(mut cfg: EngineConfig, handler: Arc<H>) -> Result<Engine<F>, EngineError> {
        cfg.validate().map_err(EngineError::Config)?;
        if cfg.auth_key.is_none() {
            cfg.auth_key =
                crate::con::AuthKey::from_config(cfg.auth_key_file.as_deref()).map_err(EngineError::Config)?;
        }
        let cfg = Arc::new(cfg);
        // The UDP address first: a bad or busy `listen` is a configuration
        // error, reported before any memory is registered.
        let socket = std::net::UdpSocket::bind(cfg.listen)
            .map_err(|e| EngineError::Config(format!("listen = {}: cannot bind the UDP socket: {e}", cfg.listen)))?;
        let fabric = F::open(&cfg.device).map_err(|e| match e {
            FabricError::UnknownDevice { .. } | FabricError::NoDevice | FabricError::Unavailable(_) => {
                EngineError::Config(format!("device (fabric {}): {e}", F::KIND.name()))
            }
            FabricError::BadPort { .. } => EngineError::Config(format!("port: {e}")),
            e => EngineError::Fabric(e),
        })?;
        let info = fabric.info().clone();
        check_device_limits(&cfg, &info).map_err(EngineError::Config)?;
        let send_cqe = cfg.max_connections * cfg.sq_size + 64;
        let recv_cqe = cfg.srq_size + 64;
        let send_cq = fabric.create_cq(send_cqe)?;
        let recv_cq = fabric.create_cq(recv_cqe)?;
        let srq = fabric.create_srq(cfg.srq_size, cfg.recv_sges_per_wr)?;
        let max_inline = if cfg.max_inline == 0 { 0 } else { fabric.max_inline_data().min(cfg.max_inline) };
        let caps = QpCaps { max_send_wr: cfg.sq_size, max_send_sge: 2, max_inline_data: max_inline };
        let pool = Arc::new(RecvPool::new(&fabric, cfg.recv_buffer_count, cfg.recv_buffer_size)?);
        let queues = Arc::new(QueueSet { fabric, send_cq, recv_cq, srq, caps });
        let events = {
            let h = handler.clone();
            Arc::new(move |e: NodeEvent| h.node_event(e)) as crate::con::manager::EventSink
        };
        let mgr = Arc::new(ConManager::with_socket(cfg.clone(), queues, events, socket)?);
        // Before the job thread reads the socket: packets that peers sent
        // while this engine started (queued in the socket) find them.
        for &(id, addr) in cfg.nodes.iter().filter(|n| n.0 != cfg.node_id) {
            mgr.add_node(id, addr).map_err(|e| EngineError::Config(format!("node.{}: {e}", id.0)))?;
        }
        let stats = Arc::new(EngineStats::default());
        let running = Arc::new(AtomicBool::new(true));
        let send = SendThread::new(&cfg, mgr.clone(), handler.clone(), stats.clone())?;
        let recv = RecvThread::new(&cfg, mgr.clone(), handler.clone(), pool.clone(), stats.clone())?;
        let mut engine = Engine {
            cfg: cfg.clone(),
            mgr: mgr.clone(),
            pool,
            stats: stats.clone(),
            running: running.clone(),
            threads: Vec::new(),
        };
        let node = cfg.node_id;
        let spawn = |role: ThreadRole, body: Box<dyn FnOnce() + Send>| {
            let (h, stats, running, mgr) = (handler.clone(), stats.clone(), running.clone(), mgr.clone());
            std::thread::Builder::new().name(format!("ibdxnet-{}-{:04x}", role.name(), node.0)).spawn(move || {
                h.thread_started(role);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
                if outcome.is_err() {
                    // Report and stop the whole engine cleanly: no half-running engine.
                    log::error!("node {node}: {} thread panicked; shutting the engine down", role.name());
                    stats.thread_panics.fetch_add(1, Ordering::Relaxed);
                    running.store(false, Ordering::Release);
                    mgr.shutdown();
                }
                h.thread_stopping(role);
            })
        };
        let m = mgr.clone();
        engine.threads.push(spawn(ThreadRole::Job, Box::new(move || m.run()))?);
        let (r, p) = (running.clone(), cfg.parking);
        let mut send = send;
        engine.threads.push(spawn(ThreadRole::Send, Box::new(move || agent_loop(&r, p, || send.do_work())))?);
        let r = running.clone();
        let mut recv = recv;
        engine.threads.push(spawn(
            ThreadRole::Recv,
            Box::new(move || {
                agent_loop(&r, p, || recv.do_work());
                recv.drain();
            }),
        )?);
        Ok(engine)
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.cfg.node_id
    }
    /// The configuration in force.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    /// The connection manager (node table, connections, counters).
    pub fn manager(&self) -> &Arc<ConManager<F>> {
        &self.mgr
    }
    /// Counters.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }
    /// False once the engine stopped (shutdown or a thread failure).
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }
    /// Adds a node to the node table.
    pub fn add_node(&self, id: NodeId, addr: std::net::SocketAddr) -> Result<(), String> {
        self.mgr.add_node(id, addr)
    }
    /// Removes a node (closes its connection, reports `Invalidated`).
    pub fn remove_node(&self, id: NodeId) -> bool {
        self.mgr.remove_node(id)
    }
    /// The established connection to `node`, created on demand, waiting up
    /// to the configured connect timeout.
    pub fn connect(&self, node: NodeId) -> Result<Arc<Connection<F>>, ConError> {
        self.connect_timeout(node, self.cfg.connect_timeout)
    }
    /// As [`Engine::connect`] with an explicit timeout.
    pub fn connect_timeout(&self, node: NodeId, timeout: Duration) -> Result<Arc<Connection<F>>, ConError> {
        self.mgr.connect(node, timeout)
    }
    /// Returns a received buffer to the pool; any thread.
    pub fn return_buffer(&self, id: u32) -> Result<(), ReturnError> {
        self.pool.give_back(id)
    }
    /// The receive buffer pool (to return buffers without the engine handle).
    pub fn buffer_pool(&self) -> Arc<RecvPool<F>> {
        self.pool.clone()
    }
    /// Every counter by name: the engine's, the connection manager's
    /// ([`ConManager::stats_map`]) and the free receive buffers. This is the
    /// statistics map Java reads (`NativeEngine.stats()`).
    pub fn stats_map(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut m = vec![
            ("wrs_sent", l(&s.wrs_sent)),
            ("bytes_sent", l(&s.bytes_sent)),
            ("bytes_received", l(&s.bytes_received)),
            ("messages_received", l(&s.messages_received)),
            ("errors", l(&s.errors)),
            ("thread_panics", l(&s.thread_panics)),
            ("protocol_violations", l(&s.protocol_violations)),
        ];
        m.extend(self.mgr.stats_map());
        m.push(("free_buffers", self.pool.available() as u64));
        m
    }

    /// Receive buffers currently free in the pool.
    pub fn free_buffers(&self) -> usize {
        self.pool.available()
    }

    /// Stops the threads and joins them; connections are closed.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.running.store(false, Ordering::Release);
        self.mgr.shutdown();
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                log::error!("node {}: an engine thread could not be joined", self.cfg.node_id);
            }
        }
    }
}

impl<F: Fabric> Drop for Engine<F> {
    fn drop(&mut self) {
        self.stop();
    }
}
