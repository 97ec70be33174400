//! The msgrc engine (paper §7.2): one instance per node, with a job thread
//! (connection manager), a send thread and a receive thread (or, with
//! `engine_threads=shared`, one thread doing both), all generic over the
//! fabric. Its user implements [`EngineHandler`]. This module
//! starts and stops the threads and checks the configuration against the
//! device; the threads' work is in `send` and `recv`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::agent::{agent_loop, Both};
use super::config::{ConfigError, EngineConfig, EngineThreads};
use super::handler::{EngineHandler, ThreadRole};
use super::recv::RecvThread;
use super::recv_agent::{CallerPoll, RecvAgent, WaitingCaller};
use super::recv_pool::{RecvPool, ReturnError};
use super::send::SendThread;
use super::send_agent::SendAgent;
use super::stats::EngineStats;
use super::stats_print::{self, StatsPrinter};
use crate::con::{ConConfig, ConError, ConManager, Connection, EventSink, NodeError, NodeEvent, NodeId, QueueSet};
use crate::fabric::{Fabric, FabricError, QpCaps};
use crate::sys::counter::Part;
use crate::sys::doorbell::Doorbell;

/// Why an engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The configuration is invalid, or the host cannot run it (listen
    /// address, key file, device, port, device limits, CPUs).
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// The fabric failed.
    #[error("fabric: {0}")]
    Fabric(#[from] FabricError),
    /// The UDP socket or a thread could not be set up.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// What the connection manager needs of the engine's configuration.
fn con_config(cfg: &EngineConfig) -> ConConfig {
    ConConfig {
        node_id: cfg.node_id,
        listen: cfg.listen,
        auth_key: cfg.auth_key.clone(),
        max_connections: cfg.max_connections,
        evict_at_limit: cfg.evict_at_limit,
        send_ring_size: cfg.send_ring_size,
        connect_timeout: cfg.connect_timeout,
        exchange_retry: cfg.exchange_retry,
        discovery_interval: cfg.discovery_interval,
        flow_unit: cfg.flow_control_unit,
    }
}

/// Restricts the calling engine thread to `cpu` (`pin_threads`). The start
/// checked that the CPU is one the starting thread may use, so this fails
/// only if the host changed meanwhile (a CPU went offline, the cpuset
/// shrank): then the thread runs unpinned, with a warning, rather than the
/// engine stopping for a placement hint.
fn pin(node: NodeId, role: ThreadRole, cpu: usize) {
    if let Err(e) = crate::sys::affinity::pin_current_thread(cpu) {
        log::warn!(
            "node {node}: pin_threads: cannot pin the {} thread to CPU {cpu}: {e}; it runs unpinned",
            role.name()
        );
    }
}

/// The counters of the statistics map: the engine's, the connection
/// manager's and the receive buffers.
fn counters<F: Fabric>(
    stats: &EngineStats,
    mgr: &ConManager<F>,
    pool: &RecvPool<F>,
    mem: Memory,
) -> Vec<(&'static str, u64)> {
    let mut m = stats.entries();
    m.extend(mgr.stats_map());
    m.push(("free_buffers", pool.available() as u64));
    m.push(("posted_buffers", u64::from(pool.posted())));
    m.push(("recv_pool_slabs", u64::from(pool.slabs_registered())));
    m.push(("recv_pool_bytes", pool.registered_bytes()));
    let connections = mgr.connection_count() as u64;
    m.push(("bytes_per_connection", mem.per_connection));
    m.push((
        "bytes_per_node",
        mem.fixed + pool.registered_bytes() + pool.bookkeeping_bytes() + connections * mem.per_connection,
    ));
    m
}

/// The engine's memory besides the receive pool: what every node allocates
/// once, and what each connection does (its registered send ring).
#[derive(Debug, Clone, Copy)]
struct Memory {
    fixed: u64,
    per_connection: u64,
}

impl Memory {
    fn of(cfg: &EngineConfig) -> Memory {
        use crate::abi::{CompletedWork, CompletedWorkList, IncomingEntry, IncomingRingHeader};
        use std::mem::size_of;
        let incoming = size_of::<IncomingRingHeader>() + cfg.incoming_ring_size as usize * size_of::<IncomingEntry>();
        let completed =
            size_of::<CompletedWorkList>() + (cfg.max_connections + 64) as usize * size_of::<CompletedWork>();
        // The receive thread's slots: `srq_size` vectors of buffer ids.
        let slots = cfg.srq_size as usize * (size_of::<Vec<u32>>() + cfg.recv_sges_per_wr as usize * 4);
        Memory { fixed: (incoming + completed + slots) as u64, per_connection: u64::from(cfg.send_ring_size) }
    }
}

/// A running engine. Dropping it shuts it down.
pub struct Engine<F: Fabric> {
    cfg: Arc<EngineConfig>,
    mgr: Arc<ConManager<F>>,
    pool: Arc<RecvPool<F>>,
    stats: Arc<EngineStats>,
    running: Arc<AtomicBool>,
    send_doorbell: Arc<Doorbell>,
    recv_doorbell: Arc<Doorbell>,
    threads: Vec<JoinHandle<()>>,
    /// Runs the send work on a user's thread (`send_from_caller`).
    caller_send: Box<dyn Fn(usize) + Send + Sync>,
    /// Runs the receive work on a user's thread waiting for a response (`recv_from_caller`).
    caller_recv: Box<dyn WaitingCaller>,
    /// The statistics print thread (`stats_print_interval_ms` > 0), stopped
    /// after the engine threads so that its final print has their last counts.
    printer: Option<StatsPrinter>,
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
        cfg.validate()?;
        cfg.check_pins()?;
        if cfg.auth_key.is_none() {
            cfg.auth_key = crate::con::AuthKey::from_config(cfg.auth_key_file.as_deref()).map_err(ConfigError::from)?;
        }
        let cfg = Arc::new(cfg);
        // The UDP address first: a bad or busy `listen` is a configuration
        // error, reported before any memory is registered.
        let socket =
            std::net::UdpSocket::bind(cfg.listen).map_err(|source| ConfigError::Listen { addr: cfg.listen, source })?;
        let fabric = F::open(&cfg.device).map_err(|e| match e {
            FabricError::UnknownDevice { .. } | FabricError::NoDevice | FabricError::Unavailable(_) => {
                ConfigError::Device { fabric: F::KIND.name(), source: e }.into()
            }
            FabricError::BadPort { .. } => ConfigError::Port(e).into(),
            e => EngineError::Fabric(e),
        })?;
        cfg.check_device_limits(fabric.info()).map_err(ConfigError::from)?;
        let send_cqe = cfg.max_connections * cfg.sq_size + 64;
        let recv_cqe = cfg.srq_size + 64;
        let send_cq = fabric.create_cq(send_cqe)?;
        let recv_cq = fabric.create_cq(recv_cqe)?;
        let srq = fabric.create_srq(cfg.srq_size, cfg.recv_sges_per_wr)?;
        let max_inline = if cfg.max_inline == 0 { 0 } else { fabric.max_inline_data().min(cfg.max_inline) };
        let caps = QpCaps { max_send_wr: cfg.sq_size, max_send_sge: 2, max_inline_data: max_inline };
        let slab = cfg.recv_slab_buffers.max(cfg.recv_sges_per_wr);
        let pool = Arc::new(RecvPool::with_slabs(&fabric, cfg.recv_buffer_count, cfg.recv_buffer_size, slab)?);
        let queues = Arc::new(QueueSet { fabric, send_cq, recv_cq, srq, caps });
        let events = {
            let h = handler.clone();
            Arc::new(move |e: NodeEvent| h.node_event(e)) as EventSink
        };
        let stats = Arc::new(EngineStats::default());
        // Release: a reader that finds the table (after `start` returned) sees it.
        stats.receive_buffers.store(u64::from(pool.count()), Ordering::Release);
        // The manager counts in the engine's table (which Java reads in place).
        let (con_stats, auth_stats) = (Part::of(stats.clone()), Part::of(stats.clone()));
        let mgr = Arc::new(ConManager::with_counters(con_config(&cfg), queues, events, socket, con_stats, auth_stats)?);
        // Before the job thread reads the socket: packets that peers sent
        // while this engine started (queued in the socket) find them.
        for &(id, addr) in cfg.nodes.iter().filter(|n| n.0 != cfg.node_id) {
            mgr.add_node(id, addr).map_err(|source| ConfigError::StartNode { id, source })?;
        }
        let running = Arc::new(AtomicBool::new(true));
        let shared = cfg.engine_threads == EngineThreads::Shared;
        let send_doorbell = Arc::new(Doorbell::new()?);
        // Shared: one doorbell, that every waker of either side rings and the
        // one thread sleeps on (`agent::sleep_together`).
        let recv_doorbell = if shared { send_doorbell.clone() } else { Arc::new(Doorbell::new()?) };
        // Who wakes whom: connection changes and the user's new data (see
        // `wake_send`) the send thread, returned buffers the receive thread.
        mgr.wake_on_change(send_doorbell.clone());
        pool.wake_on_return(recv_doorbell.clone());
        let send = SendThread::new(&cfg, mgr.clone(), handler.clone(), stats.clone())?;
        let (send, caller) = SendAgent::new(send, handler.clone(), send_doorbell.clone(), mgr.clone(), stats.clone());
        let recv = RecvThread::new(&cfg, mgr.clone(), handler.clone(), pool.clone(), stats.clone())?;
        let (recv, waiting) = RecvAgent::new(recv, handler.clone(), recv_doorbell.clone(), mgr.clone(), stats.clone());
        let mut engine = Engine {
            cfg: cfg.clone(),
            mgr: mgr.clone(),
            pool,
            stats: stats.clone(),
            running: running.clone(),
            send_doorbell,
            recv_doorbell,
            threads: Vec::new(),
            caller_send: Box::new(move |token| caller.run(token)),
            caller_recv: Box::new(waiting),
            printer: None,
        };
        let (node, pins) = (cfg.node_id, cfg.pin_threads);
        let spawn = |role: ThreadRole, body: Box<dyn FnOnce() + Send>| {
            let (h, stats, running, mgr) = (handler.clone(), stats.clone(), running.clone(), mgr.clone());
            std::thread::Builder::new().name(format!("ibdxnet-{}-{:04x}", role.name(), node.0)).spawn(move || {
                if let Some(cpu) = pins.cpu(role) {
                    pin(node, role, cpu);
                }
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
        let (r, p, st) = (running.clone(), cfg.parking, stats.clone());
        if shared {
            let mut both = Both { send, recv };
            engine.threads.push(spawn(
                ThreadRole::Shared,
                Box::new(move || {
                    agent_loop(&r, p, &mut both, &[&st.send_iterations, &st.recv_iterations]);
                    drop(both); // stops their states (as a panic would): send, then receive
                }),
            )?);
        } else {
            let mut send = send;
            engine.threads.push(spawn(
                ThreadRole::Send,
                Box::new(move || {
                    agent_loop(&r, p, &mut send, &[&st.send_iterations]);
                    drop(send); // stops its state (after a caller's last run)
                }),
            )?);
            let (r, st) = (running.clone(), stats.clone());
            let mut recv = recv;
            engine.threads.push(spawn(
                ThreadRole::Recv,
                Box::new(move || {
                    agent_loop(&r, p, &mut recv, &[&st.recv_iterations]);
                    drop(recv); // stops its state: the buffers it holds go back to the pool
                }),
            )?);
        }
        if !cfg.stats_print_interval.is_zero() {
            let (st, m, p, on, mem) =
                (stats.clone(), mgr.clone(), engine.pool.clone(), cfg.stats_timers, Memory::of(&cfg));
            let report =
                Box::new(move |what: &str| stats_print::lines(node, what, &counters(&st, &m, &p, mem), &st, on));
            let name = format!("ibdxnet-stats-{:04x}", node.0);
            engine.printer = Some(StatsPrinter::start(name, cfg.stats_print_interval, report)?);
        }
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

    /// The statistics, shared: whoever keeps this keeps the counters table
    /// readable after the engine is gone (the JNI engine slot does, for Java's
    /// `NativeCounters`).
    pub fn stats_shared(&self) -> Arc<EngineStats> {
        self.stats.clone()
    }
    /// False once the engine stopped (shutdown or a thread failure).
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }
    /// Adds a node to the node table.
    pub fn add_node(&self, id: NodeId, addr: std::net::SocketAddr) -> Result<(), NodeError> {
        self.mgr.add_node(id, addr)
    }
    /// Adds a candidate address: the node answering there is discovered and
    /// entered into the node table (see [`ConManager::add_address`]).
    pub fn add_address(&self, addr: std::net::SocketAddr) -> Result<(), NodeError> {
        self.mgr.add_address(addr)
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
    /// Tells a sleeping send thread that the user has new data: call after
    /// publishing it (cheap while the thread is awake: one load).
    pub fn wake_send(&self) {
        self.send_doorbell.wake_if_sleeping();
    }
    /// A user's thread starts waiting for a response and will poll the
    /// receive side itself ([`Engine::recv_from_caller`]) until it calls
    /// [`Engine::recv_end`], if the receive thread sleeps (or others poll
    /// already); it sleeps on meanwhile. False (and nothing to end) if the
    /// thread is awake, or with `recv_from_caller=false`.
    pub fn recv_begin(&self) -> bool {
        self.cfg.recv_from_caller && self.caller_recv.begin()
    }

    /// One receive iteration on this thread, between [`Engine::recv_begin`]
    /// and [`Engine::recv_end`]: the handler's `received` comes on this
    /// thread (`token`: see [`EngineHandler::lend_recv_role`]).
    pub fn recv_from_caller(&self, token: usize) -> CallerPoll {
        self.caller_recv.poll(token)
    }

    /// The waiting ends (once per true [`Engine::recv_begin`]); the last
    /// waiter hands the watch of the receive queue back to the thread.
    pub fn recv_end(&self, token: usize) {
        self.caller_recv.end(token);
    }

    /// Tests only (the negative control of `tests/recv_from_caller.rs`):
    /// the last waiter leaves without handing the watch back.
    #[doc(hidden)]
    pub fn test_recv_end_without_arming(&self, skip: bool) {
        self.caller_recv.skip_arm_on_leave(skip);
    }

    /// After the user published data, on its own thread: if the send thread
    /// is idle or asleep, this thread runs the send work itself (posting the
    /// data without waking it), else the send thread sees the data. `token`
    /// is what the handler's up-calls need on this thread
    /// ([`EngineHandler::lend_send_role`]); `bytes`: the data just
    /// published (0: flow control only). With `send_from_caller=false`, or
    /// `bytes` above `send_from_caller_max_bytes`, it only wakes the send
    /// thread ([`Engine::wake_send`]).
    pub fn send_from_caller(&self, token: usize, bytes: u32) {
        if self.cfg.send_from_caller && bytes <= self.cfg.send_from_caller_max_bytes {
            (self.caller_send)(token);
        } else {
            self.wake_send();
        }
    }
    /// The send thread's doorbell, whose sleeping word Java reads.
    pub fn send_doorbell(&self) -> &Arc<Doorbell> {
        &self.send_doorbell
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
    ///
    /// Then the operation timers' figures (`timer_<op>_<figure>`,
    /// [`super::stats::TIMERS`]); all zero with `stats_timers` off.
    pub fn stats_map(&self) -> Vec<(&'static str, u64)> {
        let mut m = counters(&self.stats, &self.mgr, &self.pool, Memory::of(&self.cfg));
        m.extend(self.stats.timer_entries());
        m
    }

    /// The statistics as the print thread prints them (`stats_print::lines`):
    /// a head line naming `what`, the counters, one line per timer.
    pub fn statistics_lines(&self, what: &str) -> Vec<String> {
        let c = counters(&self.stats, &self.mgr, &self.pool, Memory::of(&self.cfg));
        stats_print::lines(self.cfg.node_id, what, &c, &self.stats, self.cfg.stats_timers)
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
        self.send_doorbell.ring();
        self.recv_doorbell.ring();
        let me = std::thread::current().id();
        for t in self.threads.drain(..) {
            if t.thread().id() == me {
                // Called inside one of our up-calls: that thread ends its loop
                // when the up-call returns (`running` is false); joining itself
                // would fail (EDEADLK) and panic half-way through.
                continue;
            }
            if t.join().is_err() {
                log::error!("node {}: an engine thread could not be joined", self.cfg.node_id);
            }
        }
        if let Some(mut p) = self.printer.take() {
            p.stop();
        }
    }
}

impl<F: Fabric> Drop for Engine<F> {
    fn drop(&mut self) {
        self.stop();
    }
}
