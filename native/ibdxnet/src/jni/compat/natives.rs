//! Upstream's six natives of `de.hhu.bsinfo.dxnet.ib.MsgrcJNIBinding`,
//! exported under their JNI names (the JVM binds them lazily, for whichever
//! class loader loaded the class and this library). Upstream's semantics:
//! return codes, no Java exceptions; every native catches panics.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

use jni::objects::{JClass, JObject, JString};
use jni::sys::{jboolean, jint, jlong, jshort, JNI_FALSE, JNI_TRUE};
use jni::JNIEnv;

use super::config::{self, InitParams};
use super::{current, install, take, AnyCompat, Compat};
use crate::con::{ConError, NodeId};
use crate::fabric::sim::SimFabric;
use crate::fabric::simhost::SimHostFabric;
use crate::fabric::verbs::VerbsFabric;
use crate::fabric::{Fabric, FabricKind, ENV_FABRIC};

/// Runs a native's body; a panic is logged and becomes `fallback`.
fn guard<R>(what: &str, fallback: R, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            log::error!("ibdxnet compat: panic in MsgrcJNIBinding.{what}: {msg}");
            fallback
        }
    }
}

/// Clears a pending Java exception (upstream's natives throw none), logging it.
fn clear_exception(env: &mut JNIEnv, what: &str) {
    if env.exception_check().unwrap_or(false) {
        let _ = env.exception_describe();
        let _ = env.exception_clear();
        log::error!("ibdxnet compat: {what}: the Java exception above was cleared");
    }
}

/// The system property `name`, if set.
fn property(env: &mut JNIEnv, name: &str) -> Option<String> {
    let got = (|| -> jni::errors::Result<Option<String>> {
        let key = env.new_string(name)?;
        let v = env
            .call_static_method(
                "java/lang/System",
                "getProperty",
                "(Ljava/lang/String;)Ljava/lang/String;",
                &[(&key).into()],
            )?
            .l()?;
        if v.is_null() {
            return Ok(None);
        }
        let s: String = env.get_string(&JString::from(v))?.into();
        Ok(Some(s))
    })();
    clear_exception(env, "System.getProperty");
    got.unwrap_or(None)
}

fn start<F: Fabric>(env: &mut JNIEnv, handler: &JObject, cfg: crate::msgrc::EngineConfig) -> Result<Compat<F>, String> {
    let ids = super::handler::UpstreamIds::lookup(env, handler).map_err(|e| {
        clear_exception(env, "CallbackHandler lookup");
        format!("the call-back handler lacks upstream's CallbackHandler methods: {e}")
    })?;
    let java_connections = super::handler::JavaConnections::lookup(env, handler);
    let vm = env.get_java_vm().map_err(|e| format!("GetJavaVM: {e}"))?;
    let global = env.new_global_ref(handler).map_err(|e| format!("NewGlobalRef: {e}"))?;
    Compat::start(vm, global, ids, java_connections, cfg)
}

/// `static native boolean init(CallbackHandler, boolean pinSendRecvThreads,
/// boolean enableSignalHandler, int statisticsThreadPrintIntervalMs, short
/// ownNodeId, int connectionCreationTimeoutMs, int maxNumConnections, int
/// sqSize, int srqSize, int sharedSCQSize, int sharedRCQSize, int
/// sendBufferSize, long recvBufferPoolSize, int recvBufferSize, int maxSGEs)`:
/// starts the process's one engine; false (with a logged reason) on a bad
/// configuration, a second init, or a start failure.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_de_hhu_bsinfo_dxnet_ib_MsgrcJNIBinding_init<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handler: JObject<'l>,
    pin_send_recv_threads: jboolean,
    enable_signal_handler: jboolean,
    statistics_print_interval_ms: jint,
    own_node_id: jshort,
    connection_creation_timeout_ms: jint,
    max_num_connections: jint,
    sq_size: jint,
    srq_size: jint,
    shared_scq_size: jint,
    shared_rcq_size: jint,
    send_buffer_size: jint,
    recv_buffer_pool_size: jlong,
    recv_buffer_size: jint,
    max_sges: jint,
) -> jboolean {
    let p = InitParams {
        pin_send_recv_threads: pin_send_recv_threads != 0,
        enable_signal_handler: enable_signal_handler != 0,
        statistics_print_interval_ms,
        own_node_id,
        connection_creation_timeout_ms,
        max_num_connections,
        sq_size,
        srq_size,
        shared_scq_size,
        shared_rcq_size,
        send_buffer_size,
        recv_buffer_pool_size,
        recv_buffer_size,
        max_sges,
    };
    let ok = guard("init", false, || match init(&mut env, &handler, &p) {
        Ok(()) => true,
        Err(reason) => {
            log::error!("ibdxnet compat: MsgrcJNIBinding.init refused: {reason}");
            false
        }
    });
    if ok {
        JNI_TRUE
    } else {
        JNI_FALSE
    }
}

fn init(env: &mut JNIEnv, handler: &JObject, p: &InitParams) -> Result<(), String> {
    if handler.is_null() {
        return Err("the call-back handler is null".into());
    }
    if current().is_some() {
        return Err("already initialised (one engine per process, as upstream; call shutdown first)".into());
    }
    let listen = property(env, config::LISTEN_PROPERTY).or_else(|| std::env::var(config::LISTEN_ENV).ok());
    let keys = property(env, config::KEYS_PROPERTY).or_else(|| std::env::var(config::KEYS_ENV).ok());
    let mapped = config::map(p, listen.as_deref(), keys.as_deref())?;
    for n in &mapped.notes {
        log::warn!("ibdxnet compat: {n}");
    }
    let cfg = mapped.config;
    if !cfg.stats_print_interval.is_zero()
        && !log::log_enabled!(target: crate::msgrc::stats_print::TARGET, log::Level::Info)
    {
        log::warn!(
            "ibdxnet compat: m_statisticsThreadPrintIntervalMs = {}: the statistics are logged at INFO on target \
             ibdxnet::stats, which the log filter hides (set RUST_LOG=warn,ibdxnet::stats=info)",
            p.statistics_print_interval_ms
        );
    }
    let kind = cfg.fabric.resolve().map_err(|e| e.to_string())?;
    // Upstream's init fails on a host without an RDMA device; `auto` would
    // fall back to the in-process simulation, which only a user who asks for it gets.
    let asked = cfg.fabric != FabricKind::Auto || std::env::var(ENV_FABRIC).is_ok_and(|v| !v.trim().is_empty());
    if kind == FabricKind::Sim && !asked {
        return Err(format!(
            "no RDMA device found (as upstream's library, this one needs one); for the simulation set \
             {ENV_FABRIC}=simhost (the processes of this host) or sim (this process), or fabric=simhost in {}",
            config::KEYS_PROPERTY
        ));
    }
    let (node, listen) = (cfg.node_id, cfg.listen);
    let any = match kind {
        FabricKind::Verbs => AnyCompat::Verbs(start::<VerbsFabric>(env, handler, cfg)?),
        FabricKind::SimHost => AnyCompat::SimHost(start::<SimHostFabric>(env, handler, cfg)?),
        _ => AnyCompat::Sim(start::<SimFabric>(env, handler, cfg)?),
    };
    install(any)?;
    log::info!("ibdxnet compat: node {node} initialised, listening on {listen} ({kind:?})");
    Ok(())
}

/// `static native boolean shutdown()`: stops and frees the engine (true,
/// also when there was none).
#[no_mangle]
pub extern "system" fn Java_de_hhu_bsinfo_dxnet_ib_MsgrcJNIBinding_shutdown<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jboolean {
    guard("shutdown", (), take);
    JNI_TRUE
}

/// `static native void addNode(int ipv4)`: a candidate address (big-endian
/// `b0<<24|…|b3`) at upstream's port 5730; its node id is learned from the
/// reply and reported through `nodeDiscovered`.
#[no_mangle]
pub extern "system" fn Java_de_hhu_bsinfo_dxnet_ib_MsgrcJNIBinding_addNode<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
    ipv4: jint,
) {
    guard("addNode", (), || {
        let ip = std::net::Ipv4Addr::from(ipv4 as u32);
        let Some(c) = current() else {
            log::error!("ibdxnet compat: addNode({ip}) before init: ignored");
            return;
        };
        let port = c.peer_port();
        if let Err(e) = c.add_address(std::net::SocketAddr::new(ip.into(), port)) {
            log::error!("ibdxnet compat: addNode({ip}:{port}): {e}");
        }
    })
}

/// `static native int createConnection(short nodeId)`: connects (or takes the
/// established connection), waiting up to the configured timeout: 0 ok, 1
/// timeout, 2 any other failure (logged).
#[no_mangle]
pub extern "system" fn Java_de_hhu_bsinfo_dxnet_ib_MsgrcJNIBinding_createConnection<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
    node_id: jshort,
) -> jint {
    guard("createConnection", 2, || {
        let Some(node) = NodeId::new(node_id as u16) else {
            log::warn!("ibdxnet compat: createConnection(0xFFFF): the invalid node id");
            return 2;
        };
        let Some(c) = current() else {
            log::warn!("ibdxnet compat: createConnection({node}) before init");
            return 2;
        };
        match c.connect(node) {
            Ok(()) => 0,
            Err(ConError::Timeout { .. }) => {
                log::warn!("ibdxnet compat: createConnection({node}): timeout");
                1
            }
            Err(e) => {
                log::warn!("ibdxnet compat: createConnection({node}): {e}");
                2
            }
        }
    })
}

/// `static native long getSendBufferAddress(short nodeId)`: the send ring of
/// the node's established connection (Java then holds it); −1 if there is none.
#[no_mangle]
pub extern "system" fn Java_de_hhu_bsinfo_dxnet_ib_MsgrcJNIBinding_getSendBufferAddress<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
    node_id: jshort,
) -> jlong {
    guard("getSendBufferAddress", -1, || {
        let (Some(node), Some(c)) = (NodeId::new(node_id as u16), current()) else { return -1 };
        c.send_buffer_address(node).map_or(-1, |a| a as jlong)
    })
}

/// Returns of unknown handles or buffers not in use, for the rate-limited log.
static BAD_RETURNS: AtomicU64 = AtomicU64::new(0);

/// `static native void returnRecvBuffer(long handle)`: the handle is the
/// incoming ring entry's 64 bits at offset 8; its low 32 bits are our buffer id.
#[no_mangle]
pub extern "system" fn Java_de_hhu_bsinfo_dxnet_ib_MsgrcJNIBinding_returnRecvBuffer<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    guard("returnRecvBuffer", (), || {
        let Some(c) = current() else { return };
        if let Err(e) = c.return_buffer(handle as u32) {
            let n = BAD_RETURNS.fetch_add(1, Ordering::Relaxed);
            if n < 5 || n % 1000 == 0 {
                log::warn!("ibdxnet compat: returnRecvBuffer({handle:#x}) (#{}): {e:?}", n + 1);
            }
        }
    })
}
