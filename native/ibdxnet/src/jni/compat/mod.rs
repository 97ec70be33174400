//! Drop-in for upstream DXNet (hhu-bsinfo/dxnet 9d74334): the six natives of
//! `de.hhu.bsinfo.dxnet.ib.MsgrcJNIBinding` ([`natives`], exported under
//! their JNI names), the call-backs of its `CallbackHandler` ([`handler`]),
//! upstream's packed send structs ([`structs`]), its init parameters mapped
//! to our configuration ([`config`]), and the connections Java holds
//! ([`held`]). One engine per process, as upstream's `g_system`.

pub mod config;
pub mod handler;
pub mod held;
pub mod natives;
pub mod structs;

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use jni::objects::GlobalRef;
use jni::JavaVM;

use self::handler::{CompatHandler, JavaConnections, UpstreamIds};
use self::held::Held;
use crate::con::{ConError, NodeId};
use crate::fabric::sim::SimFabric;
use crate::fabric::simhost::SimHostFabric;
use crate::fabric::verbs::VerbsFabric;
use crate::fabric::Fabric;
use crate::msgrc::config::DEFAULT_UDP_PORT;
use crate::msgrc::recv_pool::ReturnError;
use crate::msgrc::{Engine, EngineConfig};
use crate::sys::write_watch::WriteWatch;

/// The engine on one fabric, its handler and what Java holds.
pub struct Compat<F: Fabric> {
    engine: Engine<F>,
    held: Arc<Held<F>>,
    handler: Arc<CompatHandler<F>>,
}

impl<F: Fabric> Compat<F> {
    /// Starts the engine calling upstream's `handler`.
    pub fn start(
        vm: JavaVM,
        handler: GlobalRef,
        ids: UpstreamIds,
        java_connections: Option<JavaConnections>,
        cfg: EngineConfig,
    ) -> Result<Self, String> {
        let held = Arc::new(Held::default());
        let h = Arc::new(CompatHandler::new(vm, handler, ids, java_connections, cfg.send_ring_size, held.clone()));
        let engine = Engine::<F>::start(cfg, h.clone()).map_err(|e| e.to_string())?;
        let off = std::env::var(config::RING_WATCH_ENV).is_ok_and(|v| v.trim() == "0");
        match if off {
            Err(std::io::Error::other(format!("{}=0", config::RING_WATCH_ENV)))
        } else {
            WriteWatch::new(engine.send_doorbell().clone())
        } {
            Ok(w) => held.set_watch(w),
            Err(e) => log::warn!(
                "ibdxnet compat: no userfaultfd write protection here ({e}): the send thread polls for upstream's data \
                 (short parks, a few % of a core while idle)"
            ),
        }
        Ok(Compat { engine, held, handler: h })
    }

    /// Connects, as upstream's `createConnection`; a node not discovered now
    /// (never answered, or lost and not answering again yet) fails at once
    /// with a timeout: upstream Java asks only for nodes it was told are
    /// discovered, and waiting would hold its send or receive thread.
    fn connect(&self, node: NodeId) -> Result<(), ConError> {
        if self.engine.manager().is_known(node) && !self.engine.manager().is_discovered(node) {
            return Err(ConError::Timeout { node, waited: Duration::ZERO });
        }
        let c = self.engine.connect(node)?;
        self.held.hold(c);
        Ok(())
    }

    fn send_buffer_address(&self, node: NodeId) -> Option<usize> {
        if let Some(c) = self.held.established(node.0) {
            return Some(c.ring().address() as usize);
        }
        let c = self.engine.manager().established(node)?;
        let a = c.ring().address() as usize;
        self.held.hold(c);
        Some(a)
    }

    /// Up-call exceptions caught so far.
    pub fn upcall_exceptions(&self) -> u64 {
        self.handler.upcalls.exceptions()
    }
}

/// The engine on the fabric `fabric`/`IBDXNET_FABRIC` chose.
pub enum AnyCompat {
    /// In-process simulation.
    Sim(Compat<SimFabric>),
    /// libibverbs.
    Verbs(Compat<VerbsFabric>),
    /// The simulation across the processes of this host.
    SimHost(Compat<SimHostFabric>),
}

/// Runs `$body` with `$c` bound to the `Compat<F>`, whatever `F`.
macro_rules! with_compat {
    ($e:expr, |$c:ident| $body:expr) => {
        match $e {
            AnyCompat::Sim($c) => $body,
            AnyCompat::Verbs($c) => $body,
            AnyCompat::SimHost($c) => $body,
        }
    };
}

impl AnyCompat {
    fn connect(&self, node: NodeId) -> Result<(), ConError> {
        with_compat!(self, |c| c.connect(node))
    }
    fn send_buffer_address(&self, node: NodeId) -> Option<usize> {
        with_compat!(self, |c| c.send_buffer_address(node))
    }
    fn return_buffer(&self, id: u32) -> Result<(), ReturnError> {
        with_compat!(self, |c| c.engine.return_buffer(id))
    }
    /// The port `addNode`'s addresses get: the one this node listens on (all
    /// nodes of an upstream cluster use one port), or 5730 if it is ephemeral.
    fn peer_port(&self) -> u16 {
        let port = with_compat!(self, |c| c.engine.config().listen.port());
        if port == 0 {
            DEFAULT_UDP_PORT
        } else {
            port
        }
    }
    fn add_address(&self, addr: std::net::SocketAddr) -> Result<(), String> {
        with_compat!(self, |c| add_address(&c.engine, addr))
    }
    /// `(engine statistics, up-call exceptions, connections held, retired)`.
    pub fn summary(&self) -> String {
        with_compat!(self, |c| {
            let (held, retired) = c.held.counts();
            let faults = c.held.watch_faults().map_or("none (polling)".to_string(), |f| f.to_string());
            format!(
                "upcall_exceptions={} held={held} retired={retired} ring_watch_faults={faults}",
                c.upcall_exceptions()
            )
        })
    }
}

/// Discovery by address: the node answering at `addr` is entered into the
/// node table with the id it names, and reported as discovered.
fn add_address<F: Fabric>(engine: &Engine<F>, addr: std::net::SocketAddr) -> Result<(), String> {
    engine.add_address(addr).map_err(|e| e.to_string())
}

/// The process's engine (upstream's `g_system`).
static STATE: RwLock<Option<Arc<AnyCompat>>> = RwLock::new(None);

/// The engine, if initialised (a clone: no lock is held while it is used).
fn current() -> Option<Arc<AnyCompat>> {
    STATE.read().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Makes `c` the process's engine; `Err` if there is one (it is shut down).
fn install(c: AnyCompat) -> Result<(), String> {
    let mut g = STATE.write().unwrap_or_else(PoisonError::into_inner);
    if g.is_some() {
        drop(g);
        stop(Arc::new(c));
        return Err("already initialised (a concurrent init won)".into());
    }
    *g = Some(Arc::new(c));
    Ok(())
}

/// Removes and stops the process's engine, if any.
fn take() {
    let c = STATE.write().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(c) = c {
        stop(c);
    }
}

/// How long shutdown waits for natives still using the engine (a
/// `createConnection` in progress returns once the manager stopped).
const STOP_WAIT: Duration = Duration::from_secs(10);

fn stop(c: Arc<AnyCompat>) {
    log::info!("ibdxnet compat: shutdown ({})", c.summary());
    // No more node events for Java; connects in progress end at once.
    with_compat!(&*c, |x| {
        x.handler.stop_events();
        x.engine.manager().shutdown()
    });
    let deadline = Instant::now() + STOP_WAIT;
    let mut c = c;
    loop {
        match Arc::try_unwrap(c) {
            Ok(owned) => {
                with_compat!(owned, |x| {
                    // Upstream's C++ printed its statistics to stdout at every shutdown.
                    let block = x.engine.statistics_lines("shutdown").join("\n");
                    x.engine.shutdown();
                    x.held.clear();
                    println!("{block}");
                });
                return;
            }
            Err(shared) if Instant::now() < deadline => {
                c = shared;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(shared) => {
                // Never let the last user drop it: that could be an engine
                // thread (an up-call's native), which cannot join itself.
                log::error!(
                    "ibdxnet compat: shutdown: the engine is still in use after {STOP_WAIT:?}; left running (leaked)"
                );
                std::mem::forget(shared);
                return;
            }
        }
    }
}
