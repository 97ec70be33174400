//! The engine handler that calls upstream's `MsgrcJNIBinding.CallbackHandler`
//! (implemented by upstream's `IBConnectionManager`): one `getNextDataToSend`
//! per send iteration with upstream's packed structs ([`super::structs`]), one
//! `received` per receive iteration with our incoming ring as it is (its
//! layout is upstream's), and the node events.
//!
//! Unlike upstream's C++: threads attach once, as daemons (the existing
//! attach of [`crate::jni`]); the method IDs are looked up on the handler
//! object's class at init; every up-call is followed by an exception check (a
//! Java exception is counted, logged rate-limited, cleared, and counts as
//! "nothing to send" / "nothing consumed").

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use jni::objects::{GlobalRef, JMethodID, JObject, JObjectArray, JValue};
use jni::{JNIEnv, JavaVM};

use super::held::Held;
use super::structs::{UpCompletedList, UpNextWorkPackage, UpPrevWorkResults};
use crate::abi::NODE_ID_INVALID;
use crate::con::NodeEvent;
use crate::fabric::Fabric;
use crate::jni::handler::{attach_current_thread, current_env, detach_current_thread, Upcalls};
use crate::msgrc::{
    CompletedList, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults, SendWakeup, ThreadRole,
};

/// The longest the send thread sleeps on the ring watch: a write that ended
/// just before the rings were armed, while Java published it just after the
/// last look, is seen this late at most.
pub const WATCHED_SLEEP_BOUND: std::time::Duration = std::time::Duration::from_millis(10);

/// No previous package.
const NO_RESULTS: PrevWorkResults = PrevWorkResults {
    node_id: NODE_ID_INVALID,
    fc_posted: 0,
    fc_not_posted: 0,
    bytes_posted: 0,
    bytes_not_posted: 0,
    reserved: 0,
};

/// Upstream's call-backs (`MsgrcJNIBinding$CallbackHandler`), looked up on
/// the handler object's class.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamIds {
    next: JMethodID,
    received: JMethodID,
    discovered: JMethodID,
    invalidated: JMethodID,
    disconnected: JMethodID,
}

impl UpstreamIds {
    /// Looks the five methods up on `handler`'s class.
    pub fn lookup(env: &mut JNIEnv, handler: &JObject) -> jni::errors::Result<Self> {
        let class = env.get_object_class(handler)?;
        let mut id = |name: &str, sig: &str| env.get_method_id(&class, name, sig);
        Ok(UpstreamIds {
            next: id("getNextDataToSend", "(JJJ)V")?,
            received: id("received", "(J)I")?,
            discovered: id("nodeDiscovered", "(S)V")?,
            invalidated: id("nodeInvalidated", "(S)V")?,
            disconnected: id("nodeDisconnected", "(S)V")?,
        })
    }
}

/// The send thread's structs, at stable addresses (Java wraps them once).
struct SendStructs {
    next: Box<UpNextWorkPackage>,
    prev: Box<UpPrevWorkResults>,
    completed: UpCompletedList,
    /// The connection the last package was for (its results come next).
    last_connection: u32,
}

/// Owned by the send thread alone.
struct SendCell(UnsafeCell<SendStructs>);

// SAFETY: only the engine's send thread touches the cell (in
// `next_data_to_send`, the one method the engine calls on that thread, never
// re-entered: the up-call it makes returns before the next iteration); Java
// reads and writes the structs only from inside that up-call, on that thread.
unsafe impl Sync for SendCell {}
// SAFETY: the structs are plain memory; moving them to the send thread is fine.
unsafe impl Send for SendCell {}

/// Upstream's `AbstractConnectionManager.m_connections` (a final array, so
/// looked up once): the connections Java holds, by node id. Read before a
/// `nodeDisconnected`, which upstream passes on to `closeConnection` unchecked:
/// a null element there (Java dismissed or closed the connection itself, which
/// it never tells the library) would throw a NullPointerException.
pub struct JavaConnections(GlobalRef);

impl JavaConnections {
    /// Upstream's array on `handler`, if its class has one (a handler that
    /// is not upstream's `IBConnectionManager` has none).
    pub fn lookup(env: &mut JNIEnv, handler: &JObject) -> Option<Self> {
        let got = env
            .get_field(handler, "m_connections", "[Lde/hhu/bsinfo/dxnet/core/AbstractConnection;")
            .and_then(|v| v.l())
            .and_then(|a| env.new_global_ref(a));
        match got {
            Ok(g) if !g.as_obj().is_null() => Some(JavaConnections(g)),
            _ => {
                if env.exception_check().unwrap_or(false) {
                    let _ = env.exception_clear();
                }
                None
            }
        }
    }

    /// Whether Java holds a connection to `node` (true if it cannot tell).
    fn holds(&self, node: u16) -> bool {
        let raw = current_env();
        if raw.is_null() {
            return true;
        }
        // SAFETY: `raw` is this attached thread's own live JNIEnv.
        let Ok(mut env) = (unsafe { JNIEnv::from_raw(raw) }) else { return true };
        let array: &JObjectArray = self.0.as_obj().into();
        match env.get_object_array_element(array, i32::from(node)) {
            Ok(e) => {
                let held = !e.is_null();
                let _ = env.delete_local_ref(e);
                held
            }
            Err(_) => {
                let _ = env.exception_clear();
                true
            }
        }
    }
}

/// Forwards engine call-backs to upstream's `CallbackHandler`.
pub struct CompatHandler<F: Fabric> {
    vm: JavaVM,
    handler: GlobalRef,
    ids: UpstreamIds,
    send: SendCell,
    /// Bytes of each send ring (a power of two: checked at init).
    ring_size: u32,
    held: Arc<Held<F>>,
    /// Upstream's connections array, if the handler has one.
    java_connections: Option<JavaConnections>,
    /// By node id: whether Java was told the node is discovered (and not
    /// invalidated since): losses invalidate it, the next discovery tells it again.
    told_discovered: Box<[AtomicBool]>,
    /// Set by `shutdown`: node events are no longer passed on (upstream Java
    /// closed its connections before calling `shutdown`; a `nodeDisconnected`
    /// for one of them throws a NullPointerException in its handler).
    stopping: AtomicBool,
    /// The up-calls, checked after every call, and their exception count.
    pub(crate) upcalls: Upcalls,
}

impl<F: Fabric> CompatHandler<F> {
    /// A handler for `handler` (upstream's `CallbackHandler`).
    pub fn new(
        vm: JavaVM,
        handler: GlobalRef,
        ids: UpstreamIds,
        java_connections: Option<JavaConnections>,
        ring_size: u32,
        held: Arc<Held<F>>,
    ) -> Self {
        let send = SendStructs {
            next: Box::new(UpNextWorkPackage::NOTHING),
            prev: Box::new(UpPrevWorkResults::from_ours(&PrevWorkResults::default())),
            completed: UpCompletedList::new(),
            last_connection: 0,
        };
        CompatHandler {
            vm,
            handler,
            ids,
            send: SendCell(UnsafeCell::new(send)),
            ring_size,
            held,
            java_connections,
            told_discovered: (0..=u16::MAX).map(|_| AtomicBool::new(false)).collect(),
            stopping: AtomicBool::new(false),
            upcalls: Upcalls::new(true),
        }
    }

    /// From now on, node events are not passed on (shutdown).
    pub fn stop_events(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// `nodeInvalidated`, if Java was told the node is discovered.
    fn invalidate(&self, node: u16) {
        if self.told_discovered[node as usize].swap(false, Ordering::AcqRel) {
            self.node_call("nodeInvalidated", self.ids.invalidated, node);
        }
    }

    /// `nodeDisconnected`, if the connection Java holds went down, and Java
    /// still has it (else upstream's handler would throw).
    fn disconnect(&self, event: NodeEvent, node: u16) {
        if !self.held.on_closed(node) {
            log::debug!("compat: {event:?}: no connection of Java's went down, nodeDisconnected not called");
        } else if self.java_connections.as_ref().is_some_and(|j| !j.holds(node)) {
            log::debug!("compat: {event:?}: Java closed its connection itself, nodeDisconnected not called");
        } else {
            self.node_call("nodeDisconnected", self.ids.disconnected, node);
        }
    }

    /// Whether Java was told `node` is discovered (and not invalidated since).
    pub fn is_told_discovered(&self, node: u16) -> bool {
        self.told_discovered[node as usize].load(Ordering::Acquire)
    }

    /// A `(S)V` call-back on the job thread.
    fn node_call(&self, what: &str, method: JMethodID, node: u16) {
        let args = [JValue::Short(node as i16).as_jni()];
        // SAFETY: `handler` implements CallbackHandler, whose method `method`
        // takes one short and returns void; call_void uses this thread's own env.
        let _ = unsafe { self.upcalls.call_void(what, self.handler.as_obj().as_raw(), method.into_raw(), &args) };
    }
}

impl<F: Fabric> EngineHandler for CompatHandler<F> {
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage {
        // SAFETY: this is the send thread, the cell's only user (see SendCell).
        let s = unsafe { &mut *self.send.0.get() };
        let held = &self.held;
        // Results of a package for a connection Java no longer holds would be
        // applied to the one it holds now (upstream Java looks connections up
        // by node): dropped, as the ring they were about is.
        let stale = prev.node_id != NODE_ID_INVALID && held.qpn(prev.node_id) != s.last_connection;
        *s.prev = UpPrevWorkResults::from_ours(if stale { &NO_RESULTS } else { prev });
        s.completed.fill(completed.entries(), |node, conn| {
            let q = held.qpn(node);
            q == 0 || q == conn
        });
        *s.next = UpNextWorkPackage::NOTHING;
        // Java writes through this pointer during the call.
        let next_ptr: *mut UpNextWorkPackage = &mut *s.next;
        // Upstream's argument order: next, prev, completion list.
        let args = [
            JValue::Long(next_ptr as i64).as_jni(),
            JValue::Long(&*s.prev as *const UpPrevWorkResults as i64).as_jni(),
            JValue::Long(s.completed.address() as i64).as_jni(),
        ];
        // SAFETY: `handler` implements CallbackHandler, whose
        // getNextDataToSend(JJJ)V the ID names; three longs; this thread's env.
        let ok = unsafe {
            self.upcalls.call_void("getNextDataToSend", self.handler.as_obj().as_raw(), self.ids.next.into_raw(), &args)
        };
        s.completed.reset();
        if !ok {
            s.last_connection = 0;
            return NextWorkPackage::default();
        }
        // SAFETY: `next_ptr` points into the box, alive and owned by this
        // thread; Java wrote it (or not) during the call, which has returned.
        // The struct is packed (alignment 1) and every bit pattern is valid.
        let next = unsafe { next_ptr.read() }.to_ours(self.ring_size, |node| held.qpn(node));
        s.last_connection = next.connection;
        next
    }

    /// Upstream Java only answers `getNextDataToSend`: its writes into the
    /// rings it holds ring the doorbell (`sys::write_watch`); without the
    /// watch, the send thread polls.
    fn arm_send_wakeup(&self) -> SendWakeup {
        match self.held.arm_watch() {
            Some(fd) => SendWakeup::Watch { fd, bound: WATCHED_SLEEP_BOUND },
            None => SendWakeup::Poll,
        }
    }

    fn received(&self, ring: &IncomingRing) -> u32 {
        let args = [JValue::Long(ring.address() as i64).as_jni()];
        // SAFETY: `handler` implements CallbackHandler, whose received(J)I the
        // ID names; one long; the env is this thread's (or null: not attached).
        let r = unsafe {
            self.upcalls.call_int(
                current_env(),
                "received",
                self.handler.as_obj().as_raw(),
                self.ids.received.into_raw(),
                &args,
            )
        };
        // The count processed from the front (the engine clamps it to `used`).
        r.map_or(0, |n| n.max(0) as u32)
    }

    fn node_event(&self, event: NodeEvent) {
        if self.stopping.load(Ordering::Acquire) {
            log::debug!("compat: {event:?} during shutdown: not passed on");
            return;
        }
        // Upstream's C++ on a lost connection (EVENTS.md §2): nodeInvalidated,
        // then nodeDisconnected, then, once the node answers again,
        // nodeDiscovered. An orderly close (`Closed`: an eviction, or a
        // connection replaced) keeps the node discovered: only the connection
        // went, and Java may connect again at once.
        match event {
            NodeEvent::Discovered(n) => {
                if !self.told_discovered[n.0 as usize].swap(true, Ordering::AcqRel) {
                    self.node_call("nodeDiscovered", self.ids.discovered, n.0);
                }
            }
            NodeEvent::Invalidated(n) => self.invalidate(n.0),
            NodeEvent::Disconnected(n) | NodeEvent::Left { node: n, .. } => {
                self.invalidate(n.0);
                self.disconnect(event, n.0);
            }
            NodeEvent::Closed(n) | NodeEvent::Lost(n) => self.disconnect(event, n.0),
        }
    }

    fn thread_started(&self, role: ThreadRole) {
        if let Err(rc) = attach_current_thread(&self.vm) {
            log::error!("ibdxnet compat: attaching the {} thread to the JVM failed ({rc})", role.name());
        }
    }

    fn thread_stopping(&self, _role: ThreadRole) {
        detach_current_thread(&self.vm);
    }
}
