//! The engine handler that forwards to a Java `EngineCallbacks` object: one
//! up-call per send-thread and receive-thread iteration, passing native
//! struct addresses that Java reads and writes with `Unsafe`.
//!
//! The engine threads attach to the JVM once, as daemon threads named after
//! their role and node. Every up-call goes the same way ([`JniHandler::upcall`]):
//! the raw JNI `Call<Type>MethodA` (one VM transition, no hidden exception
//! check), then one `ExceptionCheck`. A Java exception is logged, cleared and
//! treated as "nothing to send" / "nothing consumed".

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};

use jni::objects::{GlobalRef, JMethodID, JObject, JValue};
use jni::sys::jvalue;

use super::cached;
use crate::abi::{
    EVENT_CLOSED, EVENT_DISCONNECTED, EVENT_DISCOVERED, EVENT_INVALIDATED, EVENT_LEFT, EVENT_LOST, LEFT_HANDLED_UNKNOWN,
};
use crate::con::NodeEvent;
use crate::msgrc::{CompletedList, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults, ThreadRole};

/// Calls a `void` Java method through the raw JNI function table: one
/// transition, no exception check (the caller checks once).
///
/// # Safety
/// `env` must be the current thread's environment and `method` a `void`
/// method of `obj`'s class whose parameters match `args`.
pub(crate) unsafe fn raw_call_void(env: &mut jni::JNIEnv, obj: &JObject, method: JMethodID, args: &[jvalue]) {
    let raw = env.get_raw();
    // SAFETY: `raw` is this thread's live JNIEnv (caller's promise), and the
    // method, receiver and arguments agree (caller's promise).
    unsafe {
        if let Some(f) = (**raw).CallVoidMethodA {
            f(raw, obj.as_raw(), method.into_raw(), args.as_ptr());
        }
    }
}

/// Calls an `int` Java method through the raw JNI function table (0 if the
/// table has no such function, which a conforming JVM never lacks).
///
/// # Safety
/// As [`raw_call_void`], for an `int` method.
pub(crate) unsafe fn raw_call_int(env: &mut jni::JNIEnv, obj: &JObject, method: JMethodID, args: &[jvalue]) -> i32 {
    let raw = env.get_raw();
    // SAFETY: as in raw_call_void.
    unsafe {
        match (**raw).CallIntMethodA {
            Some(f) => f(raw, obj.as_raw(), method.into_raw(), args.as_ptr()),
            None => 0,
        }
    }
}

/// The struct Java fills in `nextDataToSend` (only the send thread touches it).
struct NextSlot(UnsafeCell<NextWorkPackage>);

// SAFETY: only the engine's single send thread reads and writes the slot
// (directly and through Java during its own up-call).
unsafe impl Sync for NextSlot {}

/// Forwards engine callbacks to Java.
pub(crate) struct JniHandler {
    callbacks: GlobalRef,
    next: Box<NextSlot>,
    /// Java exceptions caught in up-calls.
    pub exceptions: AtomicU64,
}

impl JniHandler {
    pub fn new(callbacks: GlobalRef) -> Self {
        JniHandler {
            callbacks,
            next: Box::new(NextSlot(UnsafeCell::new(NextWorkPackage::default()))),
            exceptions: AtomicU64::new(0),
        }
    }

    /// Runs one up-call on the current (attached) thread, then checks for a
    /// Java exception once: `None` if the thread is not attached or Java threw
    /// (the exception is counted, logged and cleared).
    fn upcall<R>(
        &self,
        what: &str,
        call: impl FnOnce(&mut jni::JNIEnv, &JObject, &super::CallbackIds) -> R,
    ) -> Option<R> {
        let c = cached()?;
        let mut env = c.vm.get_env().ok()?;
        let r = call(&mut env, self.callbacks.as_obj(), &c.ids);
        if env.exception_check().unwrap_or(false) {
            let n = self.exceptions.fetch_add(1, Ordering::Relaxed);
            // Describe the first few, then every 1000th: a buggy callback
            // must not flood the log.
            if n < 5 || n % 1000 == 0 {
                log::error!("ibdxnet: Java exception in {what} (#{}):", n + 1);
                // Both err only if the JNIEnv lacks the function: the
                // exception is counted either way, and nothing else can be done.
                let _ = env.exception_describe();
            }
            let _ = env.exception_clear();
            return None;
        }
        Some(r)
    }
}

impl EngineHandler for JniHandler {
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage {
        let slot = self.next.0.get();
        // SAFETY: only this (send) thread uses the slot; see NextSlot.
        unsafe { *slot = NextWorkPackage::default() };
        let args = [
            JValue::Long(prev as *const PrevWorkResults as i64).as_jni(),
            JValue::Long(completed.address() as i64).as_jni(),
            JValue::Long(slot as i64).as_jni(),
        ];
        let called = self.upcall("nextDataToSend", |env, cb, ids| {
            // SAFETY: `env` is this attached thread's; `cb` implements
            // EngineCallbacks, whose nextDataToSend(JJJ)V the ID names; three longs.
            unsafe { raw_call_void(env, cb, ids.next_data_to_send, &args) }
        });
        match called {
            // SAFETY: as above; Java has returned, so the slot is ours again.
            Some(_) => unsafe { *slot },
            None => NextWorkPackage::default(),
        }
    }

    fn received(&self, ring: &IncomingRing) -> u32 {
        let args = [JValue::Long(ring.address() as i64).as_jni()];
        let consumed = self.upcall("received", |env, cb, ids| {
            // SAFETY: `env` is this attached thread's; `cb` implements
            // EngineCallbacks, whose received(J)I the ID names; one long.
            unsafe { raw_call_int(env, cb, ids.received, &args) }
        });
        consumed.map_or(0, |n| n.max(0) as u32)
    }

    fn node_event(&self, event: NodeEvent) {
        // The value: for `Left`, the bytes the peer handled beyond its last
        // confirmation (LEFT_HANDLED_UNKNOWN: not known); 0 for the others.
        let (kind, node, value) = match event {
            NodeEvent::Discovered(n) => (EVENT_DISCOVERED, n, 0),
            NodeEvent::Invalidated(n) => (EVENT_INVALIDATED, n, 0),
            NodeEvent::Disconnected(n) => (EVENT_DISCONNECTED, n, 0),
            NodeEvent::Closed(n) => (EVENT_CLOSED, n, 0),
            NodeEvent::Lost(n) => (EVENT_LOST, n, 0),
            NodeEvent::Left { node, handled } => {
                (EVENT_LEFT, node, handled.and_then(|h| i64::try_from(h).ok()).unwrap_or(LEFT_HANDLED_UNKNOWN))
            }
        };
        let args = [JValue::Int(kind).as_jni(), JValue::Int(i32::from(node.0)).as_jni(), JValue::Long(value).as_jni()];
        // A Java exception was logged and cleared: the event is not retried.
        let _: Option<()> = self.upcall("nodeEvent", |env, cb, ids| {
            // SAFETY: `env` is this attached thread's; `cb` implements
            // EngineCallbacks, whose nodeEvent(IIJ)V the ID names; int, int, long.
            unsafe { raw_call_void(env, cb, ids.node_event, &args) }
        });
    }

    fn thread_started(&self, role: ThreadRole) {
        // Attach once, as a daemon (the JVM may exit while we run), under the
        // thread's own name (e.g. "ibdxnet-send-0001") so it shows in thread dumps.
        let Some(c) = cached() else {
            log::error!("ibdxnet: no JVM to attach the {} thread to", role.name());
            return;
        };
        let name = std::ffi::CString::new(std::thread::current().name().unwrap_or("ibdxnet")).unwrap_or_default();
        let vm = c.vm.get_java_vm_pointer();
        let mut args = jni::sys::JavaVMAttachArgs {
            version: jni::sys::JNI_VERSION_1_8,
            name: name.as_ptr() as *mut std::ffi::c_char,
            group: std::ptr::null_mut(),
        };
        let mut env = std::ptr::null_mut();
        // SAFETY: `vm` is the live JavaVM; AttachCurrentThreadAsDaemon copies the name.
        let rc = unsafe {
            match (**vm).AttachCurrentThreadAsDaemon {
                Some(attach) => attach(vm, &mut env, &mut args as *mut _ as *mut std::ffi::c_void),
                None => jni::sys::JNI_ERR,
            }
        };
        if rc != jni::sys::JNI_OK {
            log::error!("ibdxnet: attaching the {} thread to the JVM failed ({rc})", role.name());
        }
    }

    fn thread_stopping(&self, _role: ThreadRole) {
        if let Some(c) = cached() {
            let vm = c.vm.get_java_vm_pointer();
            // SAFETY: this thread attached itself in thread_started and holds no
            // local references beyond this point.
            unsafe {
                if let Some(detach) = (**vm).DetachCurrentThread {
                    detach(vm);
                }
            }
        }
    }
}
