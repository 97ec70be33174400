//! The natives of `io.ibdxnet.ib.IbdxnetNative`. They take and return
//! primitives and addresses (strings only for configuration, layout and
//! statistics, outside the hot path).

use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jni::objects::{JClass, JObject, JString};
use jni::sys::{jboolean, jint, jlong, jlongArray, jobjectArray, jstring};
use jni::{JNIEnv, NativeMethod};

use super::handler::JniHandler;
use super::logbridge;
use super::{cached, guarded, Throw, NATIVE_CLASS};
use crate::abi;
use crate::con::NodeId;
use crate::fabric::{Fabric, FabricKind};
use crate::msgrc::{Engine, EngineConfig};
use crate::util::lock;

mod slot;
use slot::{engine, slot, AnyEngine, Handles, Native, Slot, CLOSED};

/// Runs `$body` with `$n` bound to the engine's `Native<F>`, whatever `F`.
/// `$e` is a [`slot::Lease`]: it is held until the end of the `match`.
macro_rules! with_native {
    ($e:expr, |$n:ident| $body:expr) => {
        match &*$e {
            AnyEngine::Sim($n) => $body,
            AnyEngine::Verbs($n) => $body,
            AnyEngine::SimHost($n) => $body,
        }
    };
}

mod caller;
use caller::{receive_begin, receive_end, receive_from_caller, send_from_caller, wake_send_thread};

fn node(id: jint) -> Result<NodeId, Throw> {
    u16::try_from(id).ok().and_then(NodeId::new).ok_or_else(|| Throw::arg(format!("node id {id} is not in 0..65534")))
}

fn text<'l>(env: &mut JNIEnv<'l>, s: String) -> Result<jstring, Throw> {
    Ok(env.new_string(s)?.into_raw())
}

/// The shared structs' layout and the constants ([`abi::table_text`]), then
/// the counters table's descriptor ([`crate::msgrc::stats::descriptor_text`]).
extern "system" fn layouts_text<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>) -> jstring {
    guarded(&mut env, std::ptr::null_mut(), |env| {
        text(env, abi::table_text() + &crate::msgrc::stats::descriptor_text())
    })
}

/// The address of the engine's counters table (slot 0). Valid for the life
/// of the process, also after `destroy`: the handle's slot keeps it.
extern "system" fn counters_address<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) -> jlong {
    guarded(&mut env, 0, |_| Ok(Arc::as_ptr(&slot(handle)?.stats) as jlong))
}

extern "system" fn default_config<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>) -> jstring {
    guarded(&mut env, std::ptr::null_mut(), |env| {
        let c = EngineConfig::new(
            NodeId(0),
            format!("0.0.0.0:{}", crate::msgrc::config::DEFAULT_UDP_PORT).parse().expect("valid"),
        );
        text(env, c.to_text())
    })
}

/// Checks `key=value` lines the way `create` would (the engine's parser, its
/// ranges and the rules relating keys) without starting anything: a node on
/// nio or loopback refuses a bad `native.*` value too. Keys not given keep
/// their defaults; an `IllegalArgumentException` names the key.
extern "system" fn check_config<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, config: JString<'l>) {
    guarded(&mut env, (), |env| {
        let text: String = env.get_string(&config)?.into();
        let mut cfg = EngineConfig::new(NodeId(0), "0.0.0.0:5730".parse().expect("valid"));
        cfg.apply_keys(&text, "native.").map_err(|e| Throw::arg(e.to_string()))
    })
}

fn start<F: Fabric>(cfg: EngineConfig, handler: Arc<JniHandler>) -> Result<Native<F>, Throw> {
    let engine = Engine::<F>::start(cfg, handler.clone()).map_err(|e| match e {
        // A bad configuration (including a device, port or listen address
        // that does not work here) is an IllegalArgumentException naming the key.
        crate::msgrc::EngineError::Config(_) => Throw::arg(e.to_string()),
        e => Throw::ib(e.to_string()),
    })?;
    Ok(Native { engine, conns: Mutex::new(Handles::new()), handler })
}

extern "system" fn create<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    config: JString<'l>,
    callbacks: JObject<'l>,
    check_every_upcall: jboolean,
) -> jlong {
    guarded(&mut env, 0, |env| {
        if callbacks.is_null() {
            return Err(Throw::arg("callbacks must not be null"));
        }
        let text: String = env.get_string(&config)?.into();
        let mut cfg = EngineConfig::new(NodeId(0), "0.0.0.0:5730".parse().expect("valid"));
        cfg.apply_keys(&text, "native.").map_err(|e| Throw::arg(e.to_string()))?;
        let kind = cfg.fabric.resolve().map_err(|e| Throw::arg(e.to_string()))?;
        let ids = cached().ok_or_else(|| Throw::state("JNI not initialised"))?.ids;
        let handler = Arc::new(JniHandler::new(env.new_global_ref(&callbacks)?, ids, check_every_upcall != 0));
        let any = match kind {
            FabricKind::Verbs => AnyEngine::Verbs(start(cfg, handler)?),
            FabricKind::SimHost => AnyEngine::SimHost(start(cfg, handler)?),
            _ => AnyEngine::Sim(start(cfg, handler)?),
        };
        let stats = with_native!(&any, |n| n.engine.stats_shared());
        let send_sleep_word = with_native!(&any, |n| n.engine.send_doorbell().sleeping_word());
        let engine = AtomicPtr::new(Box::into_raw(Box::new(any)));
        let slot: &'static Slot =
            Box::leak(Box::new(Slot { state: AtomicU64::new(0), engine, stats, send_sleep_word }));
        Ok(slot as *const Slot as jlong)
    })
}

/// Closes the slot (later calls get `EngineClosedException`), waits until the
/// calls in progress drop their leases, then stops the engine's threads and
/// frees it. A second `destroy` of the same handle does nothing. Called on an
/// engine thread (inside an up-call), it does not wait for that thread's own
/// up-call: up-calls hold no lease, and no native makes an up-call on the
/// calling thread.
extern "system" fn destroy<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) {
    guarded(&mut env, (), |_| {
        if handle == 0 {
            return Ok(());
        }
        let slot = slot(handle)?;
        if slot.state.fetch_or(CLOSED, Ordering::AcqRel) & CLOSED != 0 {
            return Ok(()); // closed already (or being closed by another thread)
        }
        let e = slot.engine.load(Ordering::Acquire);
        if !e.is_null() {
            // SAFETY: only the call that set CLOSED (this one) frees the engine,
            // below, after every lease ended: until then `e` points to it.
            // A connect holding a lease gives up now instead of at its timeout.
            with_native!(unsafe { &*e }, |n| n.engine.manager().refuse_connects());
        }
        let mut spins = 0u32;
        while slot.state.load(Ordering::Acquire) != CLOSED {
            // Leases are short (a connect in progress was just told to give up).
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else if spins < 200 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        let p = slot.engine.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if p.is_null() {
            return Ok(());
        }
        // SAFETY: `p` came from `Box::into_raw` in `create`; the slot is closed
        // and has no lease, and the swap took it exactly once, so nothing else
        // refers to the engine any more.
        let any = unsafe { Box::from_raw(p) };
        match *any {
            AnyEngine::Sim(n) => {
                *lock(&n.conns) = Handles::new();
                n.engine.shutdown();
            }
            AnyEngine::Verbs(n) => {
                *lock(&n.conns) = Handles::new();
                n.engine.shutdown();
            }
            AnyEngine::SimHost(n) => {
                *lock(&n.conns) = Handles::new();
                n.engine.shutdown();
            }
        }
        Ok(())
    })
}

extern "system" fn local_port<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) -> jint {
    guarded(&mut env, -1, |_| Ok(with_native!(engine(handle)?, |n| i32::from(n.engine.manager().local_addr().port()))))
}

/// The host's RDMA devices as fabric `auto` sees them, one name a line
/// (empty: none); Java's `transport = auto` asks this.
extern "system" fn rdma_devices<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>) -> jstring {
    guarded(&mut env, std::ptr::null_mut(), |env| {
        let names = crate::fabric::verbs::device_names().map_err(|e| Throw::ib(e.to_string()))?;
        text(env, names.join("\n"))
    })
}

extern "system" fn fabric_name<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) -> jstring {
    guarded(&mut env, std::ptr::null_mut(), |env| {
        let name = with_native!(engine(handle)?, |n| n.engine.manager().queues().fabric.info().name.clone());
        text(env, name)
    })
}

extern "system" fn add_node<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    handle: jlong,
    id: jint,
    host: JString<'l>,
    port: jint,
) {
    guarded(&mut env, (), |env| {
        let host: String = env.get_string(&host)?.into();
        let port = u16::try_from(port).map_err(|_| Throw::arg(format!("port {port} is not in 0..65535")))?;
        let addr = crate::con::node::resolve_host(&host, port)
            .map_err(|e| Throw::arg(format!("address {host}:{port}: {e}")))?;
        if !addr.is_ipv4() {
            return Err(Throw::arg(format!("address {host}:{port} has no IPv4 address")));
        }
        let id = node(id)?;
        with_native!(engine(handle)?, |n| n.engine.add_node(id, addr)).map_err(|e| Throw::arg(e.to_string()))
    })
}

extern "system" fn remove_node<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong, id: jint) -> jboolean {
    guarded(&mut env, 0, |_| {
        let id = node(id)?;
        // Java's handles stay: it releases them on the node's disconnect event.
        Ok(with_native!(engine(handle)?, |n| n.engine.remove_node(id)) as jboolean)
    })
}

/// Connects (or takes the established connection) to node `id` and takes one
/// handle on it: returns `{ring address, connection id}` of that one
/// connection, obtained together (a second call could see a replacement).
extern "system" fn connect<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    handle: jlong,
    id: jint,
    timeout_ms: jint,
) -> jlongArray {
    guarded(&mut env, std::ptr::null_mut(), |env| {
        let id = node(id)?;
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        // The array first: failing to allocate it must not leak a handle.
        let out = env.new_long_array(2)?;
        let pair = with_native!(engine(handle)?, |n| {
            let c = n.engine.connect_timeout(id, timeout).map_err(Throw::from)?;
            let pair = [c.ring().address() as jlong, jlong::from(c.local_qpn())];
            lock(&n.conns).acquire(c);
            Ok::<_, Throw>(pair)
        })?;
        if let Err(e) = env.set_long_array_region(&out, 0, &pair) {
            // Java will not see the connection: give its handle back.
            with_native!(engine(handle)?, |n| lock(&n.conns).release(pair[1] as u32));
            return Err(e.into());
        }
        Ok(out.into_raw())
    })
}

extern "system" fn ring_size<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) -> jint {
    guarded(&mut env, -1, |_| Ok(with_native!(engine(handle)?, |n| n.engine.config().send_ring_size as jint)))
}

/// The address of the send thread's sleeping word. Valid for the life of
/// the process, also after `destroy`: the handle's slot keeps it.
extern "system" fn send_sleep_word<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) -> jlong {
    guarded(&mut env, 0, |_| Ok(Arc::as_ptr(&slot(handle)?.send_sleep_word) as jlong))
}

extern "system" fn close_connection<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong, id: jint, force: jboolean) {
    guarded(&mut env, (), |_| {
        let id = node(id)?;
        with_native!(engine(handle)?, |n| {
            // Drop Java's handle first so a graceful close need not wait for it.
            let mut h = lock(&n.conns);
            if let Some(qpn) = h.latest.get(&id.0).copied() {
                h.release(qpn);
            }
            drop(h);
            n.engine.manager().close(id, force != 0);
        });
        Ok(())
    })
}

/// Closes the connection to node `id` at once if its queue pair is `qpn`
/// (still open); a newer connection to the node stays. True if it was closed.
/// Java uses it for connections that broke the protocol, including ones the
/// peer opened (Java holds no handle on those).
extern "system" fn close_queue_pair<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    handle: jlong,
    id: jint,
    qpn: jint,
) -> jboolean {
    guarded(&mut env, 0, |_| {
        let id = node(id)?;
        let closed = with_native!(engine(handle)?, |n| n.engine.manager().close_queue_pair(id, qpn as u32));
        Ok(jboolean::from(closed))
    })
}

/// Before shutting down: of what node `id` sent on our queue pair `qpn`, the
/// application handled `bytes` beyond its last flow-control confirmation (our
/// `Leave` tells the peer, so it knows exactly what was not handled).
extern "system" fn set_handled_on_leave<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    handle: jlong,
    id: jint,
    qpn: jint,
    bytes: jlong,
) {
    guarded(&mut env, (), |_| {
        let id = node(id)?;
        let bytes = u64::try_from(bytes).map_err(|_| Throw::arg(format!("handled bytes {bytes} < 0")))?;
        with_native!(engine(handle)?, |n| n.engine.manager().set_handled_on_leave(id, qpn as u32, bytes));
        Ok(())
    })
}

/// True while connection `qpn` (one Java holds) is established; false once it
/// is closing, closed or failed — Java re-checks its connections with this
/// after a close event, which names only the node.
extern "system" fn connection_open<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong, qpn: jint) -> jboolean {
    guarded(&mut env, 0, |_| {
        let open = with_native!(engine(handle)?, |n| {
            lock(&n.conns).by_qpn.get(&(qpn as u32)).is_some_and(|(c, _)| c.is_established())
        });
        Ok(jboolean::from(open))
    })
}

/// The flow-control unit node `id` named for our queue pair `qpn` when the
/// connection was set up (the receiver confirms that connection's bytes in
/// it); 0 if `qpn` is no longer the node's connection.
extern "system" fn peer_flow_unit<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    handle: jlong,
    id: jint,
    qpn: jint,
) -> jlong {
    guarded(&mut env, 0, |_| {
        let id = node(id)?;
        let unit = with_native!(engine(handle)?, |n| n.engine.manager().peer_flow_unit(id, qpn as u32));
        // At most MAX_FLOW_UNIT (2^62, checked by the parser): fits a jlong.
        Ok(unit.map_or(0, |u| u as jlong))
    })
}

/// Drops one of Java's handles on connection `qpn` (after its close event, once no
/// Java thread touches its ring any more); closes nothing.
extern "system" fn release_connection<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong, qpn: jint) {
    guarded(&mut env, (), |_| {
        with_native!(engine(handle)?, |n| lock(&n.conns).release(qpn as u32));
        Ok(())
    })
}

extern "system" fn return_buffer<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong, id: jint) -> jint {
    guarded(&mut env, -1, |_| {
        let r = with_native!(engine(handle)?, |n| n.engine.return_buffer(id as u32));
        Ok(match r {
            Ok(()) => abi::RETURN_BUFFER_OK,
            Err(crate::msgrc::recv_pool::ReturnError::Unknown(_)) => abi::RETURN_BUFFER_UNKNOWN,
            Err(crate::msgrc::recv_pool::ReturnError::NotInUse(_)) => abi::RETURN_BUFFER_NOT_IN_USE,
        })
    })
}

extern "system" fn stats<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) -> jstring {
    guarded(&mut env, std::ptr::null_mut(), |env| {
        let s = with_native!(engine(handle)?, |n| {
            let mut s = String::new();
            // The counters table's entries are read in place (`countersAddress`).
            let in_table = crate::msgrc::stats::in_table;
            for (k, v) in n.engine.stats_map().into_iter().filter(|(k, _)| !in_table(k)) {
                s += &format!("{k}={v}\n");
            }
            s += &format!(
                "upcall_exceptions={}\nupcall_check_every={}\nrunning={}\n",
                n.handler.upcalls.exceptions(),
                n.handler.upcalls.check_every(),
                n.engine.is_running()
            );
            s
        });
        text(env, s)
    })
}

/// `LevelFilter` of Java's level number: 0 off, 1 error … 5 trace.
fn level_filter(level: jint) -> log::LevelFilter {
    match level {
        i32::MIN..=0 => log::LevelFilter::Off,
        1 => log::LevelFilter::Error,
        2 => log::LevelFilter::Warn,
        3 => log::LevelFilter::Info,
        4 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    }
}

/// The calling (Java) thread drains the native log from now on, at `level`
/// and more severe; false if records stay on stderr (`RUST_LOG` is set, or
/// the process has another logger).
extern "system" fn log_start<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, level: jint) -> jboolean {
    guarded(&mut env, 0, |_| Ok(jboolean::from(logbridge::start(level_filter(level)))))
}

extern "system" fn log_level<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, level: jint) {
    guarded(&mut env, (), |_| {
        logbridge::set_level(level_filter(level));
        Ok(())
    })
}

/// Up to a batch of native log records, waiting up to `wait_ms` for the
/// first: `{level, logger, message}` per record (level "1" error … "5" trace).
extern "system" fn log_drain<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, wait_ms: jint) -> jobjectArray {
    guarded(&mut env, std::ptr::null_mut(), |env| {
        let records = logbridge::drain(Duration::from_millis(wait_ms.max(0) as u64));
        let out = env.new_object_array((records.len() * 3) as jint, "java/lang/String", JObject::null())?;
        for (i, r) in records.into_iter().enumerate() {
            let fields = [(r.level as usize).to_string(), r.logger, r.message];
            for (j, f) in fields.into_iter().enumerate() {
                let s = env.new_string(f)?;
                env.set_object_array_element(&out, (i * 3 + j) as jint, &s)?;
                env.delete_local_ref(s)?;
            }
        }
        Ok(out.into_raw())
    })
}

/// The Java logger names the library logs on, one a line.
extern "system" fn log_targets<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>) -> jstring {
    guarded(&mut env, std::ptr::null_mut(), |env| {
        let names: Vec<String> = logbridge::TARGETS.iter().map(|t| logbridge::java_name(t)).collect();
        text(env, names.join("\n"))
    })
}

pub(crate) fn register(env: &mut JNIEnv) -> jni::errors::Result<()> {
    let m = |name: &str, sig: &str, f: *mut c_void| NativeMethod { name: name.into(), sig: sig.into(), fn_ptr: f };
    let methods = [
        m("layouts", "()Ljava/lang/String;", layouts_text as *mut c_void),
        m("defaultConfig", "()Ljava/lang/String;", default_config as *mut c_void),
        m("checkConfig", "(Ljava/lang/String;)V", check_config as *mut c_void),
        m("create", "(Ljava/lang/String;Lio/ibdxnet/ib/EngineCallbacks;Z)J", create as *mut c_void),
        m("destroy", "(J)V", destroy as *mut c_void),
        m("localPort", "(J)I", local_port as *mut c_void),
        m("rdmaDevices", "()Ljava/lang/String;", rdma_devices as *mut c_void),
        m("fabricName", "(J)Ljava/lang/String;", fabric_name as *mut c_void),
        m("addNode", "(JILjava/lang/String;I)V", add_node as *mut c_void),
        m("removeNode", "(JI)Z", remove_node as *mut c_void),
        m("connect", "(JII)[J", connect as *mut c_void),
        m("ringSize", "(J)I", ring_size as *mut c_void),
        m("sendSleepWord", "(J)J", send_sleep_word as *mut c_void),
        m("wakeSendThread", "(J)V", wake_send_thread as *mut c_void),
        m("sendFromCaller", "(JI)V", send_from_caller as *mut c_void),
        m("receiveBegin", "(J)Z", receive_begin as *mut c_void),
        m("receiveFromCaller", "(J)I", receive_from_caller as *mut c_void),
        m("receiveEnd", "(J)V", receive_end as *mut c_void),
        m("closeConnection", "(JIZ)V", close_connection as *mut c_void),
        m("closeQueuePair", "(JII)Z", close_queue_pair as *mut c_void),
        m("setHandledOnLeave", "(JIIJ)V", set_handled_on_leave as *mut c_void),
        m("releaseConnection", "(JI)V", release_connection as *mut c_void),
        m("connectionOpen", "(JI)Z", connection_open as *mut c_void),
        m("peerFlowUnit", "(JII)J", peer_flow_unit as *mut c_void),
        m("returnBuffer", "(JI)I", return_buffer as *mut c_void),
        m("stats", "(J)Ljava/lang/String;", stats as *mut c_void),
        m("countersAddress", "(J)J", counters_address as *mut c_void),
        m("logStart", "(I)Z", log_start as *mut c_void),
        m("logLevel", "(I)V", log_level as *mut c_void),
        m("logDrain", "(I)[Ljava/lang/String;", log_drain as *mut c_void),
        m("logTargets", "()Ljava/lang/String;", log_targets as *mut c_void),
    ];
    let class = env.find_class(NATIVE_CLASS)?;
    env.register_native_methods(&class, &methods)
}
