//! The engine handler that forwards to a Java `EngineCallbacks` object: one
//! up-call per send-thread and receive-thread iteration, passing native
//! struct addresses that Java reads and writes with `Unsafe`.
//!
//! The engine threads attach to the JVM once, as daemon threads named after
//! their role and node; the send and receive threads keep their `JNIEnv` in
//! the handler's cell of their role (a field read per up-call, not a
//! thread-local lookup; the one thread of `engine_threads=shared`, attached
//! once, stores it in both cells and makes both up-calls), the job thread in a thread local
//! ([`attach_current_thread`]). Every up-call goes through [`Upcalls`]: the raw
//! JNI `Call<Type>MethodA` (one VM transition, no hidden exception check) and
//! an `ExceptionCheck` only when it can matter (see [`Upcalls::call_int`]). A
//! Java exception is counted, logged, cleared and treated as "nothing to send"
//! / "nothing consumed". The JMH benchmark (`jni/bench.rs`, mode 4 and 5)
//! calls the same [`Upcalls::call_int`], so what it measures is what runs here.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use jni::objects::{GlobalRef, JValue};
use jni::sys::{jint, jmethodID, jobject, jvalue};

use super::{cached, CallbackIds};
use crate::abi::{
    EVENT_CLOSED, EVENT_DISCONNECTED, EVENT_DISCOVERED, EVENT_INVALIDATED, EVENT_LEFT, EVENT_LOST, LEFT_HANDLED_UNKNOWN,
};
use crate::con::NodeEvent;
use crate::msgrc::{CompletedList, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults, ThreadRole};

/// Calls an `int` Java method through the raw JNI function table, no
/// exception check (0 if the table has no such function, which a conforming
/// JVM never lacks).
///
/// # Safety
/// `env` must be the current thread's live JNIEnv and `method` an `int`
/// method of `obj`'s class whose parameters match `args`.
#[inline]
pub(crate) unsafe fn raw_call_int(
    env: *mut jni::sys::JNIEnv,
    obj: jobject,
    method: jmethodID,
    args: &[jvalue],
) -> jint {
    // SAFETY: the caller's promises above.
    unsafe {
        match (**env).CallIntMethodA {
            Some(f) => f(env, obj, method, args.as_ptr()),
            None => 0,
        }
    }
}

thread_local! {
    /// This thread's JNIEnv while it is attached through
    /// [`attach_current_thread`] (null otherwise), for the rare
    /// [`Upcalls::call_void`] (`nodeEvent` on the job thread): no `GetEnv`
    /// per call. The per-iteration up-calls read their role's cell instead.
    static THREAD_ENV: Cell<*mut jni::sys::JNIEnv> = const { Cell::new(std::ptr::null_mut()) };
}

/// Attaches the current native thread to the JVM as a daemon (the JVM may
/// exit while it runs) under its own thread name (shows in thread dumps),
/// and remembers its JNIEnv for [`Upcalls`] (also returned). `Err` is the JNI error code.
pub(crate) fn attach_current_thread(vm: &jni::JavaVM) -> Result<*mut jni::sys::JNIEnv, jint> {
    let name = std::ffi::CString::new(std::thread::current().name().unwrap_or("ibdxnet")).unwrap_or_default();
    let vm = vm.get_java_vm_pointer();
    let mut args = jni::sys::JavaVMAttachArgs {
        version: jni::sys::JNI_VERSION_1_8,
        name: name.as_ptr() as *mut std::ffi::c_char,
        group: std::ptr::null_mut(),
    };
    let mut env: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: `vm` is the live JavaVM; AttachCurrentThreadAsDaemon copies the name.
    let rc = unsafe {
        match (**vm).AttachCurrentThreadAsDaemon {
            Some(attach) => attach(vm, &mut env, &mut args as *mut _ as *mut std::ffi::c_void),
            None => jni::sys::JNI_ERR,
        }
    };
    if rc != jni::sys::JNI_OK || env.is_null() {
        return Err(rc);
    }
    THREAD_ENV.set(env.cast());
    Ok(env.cast())
}

/// This thread's JNIEnv while it is attached through [`attach_current_thread`]
/// (null otherwise): one thread-local read.
pub(crate) fn current_env() -> *mut jni::sys::JNIEnv {
    THREAD_ENV.get()
}

/// Forgets this thread's JNIEnv and detaches it (after [`attach_current_thread`]).
pub(crate) fn detach_current_thread(vm: &jni::JavaVM) {
    if THREAD_ENV.replace(std::ptr::null_mut()).is_null() {
        return; // never attached (or attaching failed): nothing to detach
    }
    let vm = vm.get_java_vm_pointer();
    // SAFETY: this thread attached itself in attach_current_thread and holds
    // no local references beyond this point.
    unsafe {
        if let Some(detach) = (**vm).DetachCurrentThread {
            detach(vm);
        }
    }
}

/// The checked up-call of the engine threads, and its exception count.
///
/// # The exception protocol
/// The `int` up-calls never return 0 when they succeed (`EngineCallbacks`:
/// `nextDataToSend` returns `OK` = 1, `received` the count plus one). When a
/// Java exception escapes, HotSpot's `Call<Type>MethodA` returns 0: in
/// `jni.cpp` (`DEFINE_CALLMETHODA`, JDK 8 to 25) the result is
/// `jni_invoke_nonstatic(..., CHECK_0)`, and `CHECK_0` returns 0 when an
/// exception is pending. So only a 0 needs the `ExceptionCheck` (a JNI call
/// with a VM thread-state transition, ~17 ns); any other value proves no
/// exception is pending. The JNI specification leaves the value undefined
/// then, and `-Xcheck:jni` warns about every call result not followed by a
/// check: for those the Java side asks for `check_every` (a VM other than
/// HotSpot, or `CheckJNICalls` on; `NativeEngine.checkEveryUpcall`).
pub(crate) struct Upcalls {
    /// Check for an exception after every up-call, not only after a 0.
    check_every: bool,
    /// Java exceptions caught in up-calls.
    exceptions: AtomicU64,
}

impl Upcalls {
    pub fn new(check_every: bool) -> Self {
        Upcalls { check_every, exceptions: AtomicU64::new(0) }
    }

    /// Whether every up-call is checked (not only a 0).
    pub fn check_every(&self) -> bool {
        self.check_every
    }

    /// Java exceptions caught so far.
    pub fn exceptions(&self) -> u64 {
        self.exceptions.load(Ordering::Relaxed)
    }

    /// Calls `obj.method(args)` (an `int` method following the protocol
    /// above) on this attached thread: `None` if `env` is null (not
    /// attached) or Java threw (the exception is counted, logged and cleared).
    ///
    /// # Safety
    /// `env` must be null or the current thread's live JNIEnv; `obj` a live
    /// reference to an object whose class has the `int` method `method`,
    /// whose parameters match `args`.
    #[inline]
    pub unsafe fn call_int(
        &self,
        env: *mut jni::sys::JNIEnv,
        what: &str,
        obj: jobject,
        method: jmethodID,
        args: &[jvalue],
    ) -> Option<jint> {
        if env.is_null() {
            return None;
        }
        // SAFETY: the caller vouches for env (this thread's), obj, method and args.
        let r = unsafe { raw_call_int(env, obj, method, args) };
        if r != 0 && !self.check_every {
            return Some(r); // HotSpot returns 0 when an exception escapes: none is pending
        }
        // SAFETY: as above.
        if unsafe { self.exception_caught(env, what) } {
            return None;
        }
        Some(r)
    }

    /// Calls the `void` method `obj.method(args)` and always checks for an
    /// exception (a void method returns nothing to read): `false` if the
    /// thread is not attached or Java threw (counted, logged, cleared).
    ///
    /// # Safety
    /// As [`Self::call_int`] (the JNIEnv is this thread's own, from its
    /// thread local), for a `void` method.
    pub unsafe fn call_void(&self, what: &str, obj: jobject, method: jmethodID, args: &[jvalue]) -> bool {
        let env = THREAD_ENV.get();
        if env.is_null() {
            return false;
        }
        // SAFETY: `env` is this thread's; the caller vouches for the rest.
        unsafe {
            if let Some(f) = (**env).CallVoidMethodA {
                f(env, obj, method, args.as_ptr());
            }
            !self.exception_caught(env, what)
        }
    }

    /// `ExceptionCheck`; if one is pending, counts, logs and clears it.
    ///
    /// # Safety
    /// `env` is the current thread's live JNIEnv.
    unsafe fn exception_caught(&self, env: *mut jni::sys::JNIEnv, what: &str) -> bool {
        // SAFETY: the caller's promise; these functions are in every JNI 1.2+ table.
        unsafe {
            let pending = match (**env).ExceptionCheck {
                Some(check) => check(env) != 0,
                None => false,
            };
            if pending {
                self.handle_exception(env, what);
            }
            pending
        }
    }

    /// Rare: kept out of the up-call's inlined path.
    ///
    /// # Safety
    /// As [`Self::exception_caught`], with an exception pending.
    #[cold]
    #[inline(never)]
    unsafe fn handle_exception(&self, env: *mut jni::sys::JNIEnv, what: &str) {
        let n = self.exceptions.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's promise.
        unsafe {
            // Describe the first few, then every 1000th: a buggy callback
            // must not flood the log. (ExceptionDescribe clears it too.)
            if n < 5 || n % 1000 == 0 {
                log::error!("ibdxnet: Java exception in {what} (#{}):", n + 1);
                if let Some(describe) = (**env).ExceptionDescribe {
                    describe(env);
                }
            }
            if let Some(clear) = (**env).ExceptionClear {
                clear(env);
            }
        }
    }
}

/// What one engine thread (send or receive) keeps for its up-calls: its
/// JNIEnv (a field read instead of a thread-local lookup per up-call) and,
/// for the send thread, the struct Java fills in `nextDataToSend`.
#[derive(Default)]
struct RoleState {
    env: Cell<*mut jni::sys::JNIEnv>,
    next: Cell<NextWorkPackage>,
}

/// One [`RoleState`] per role, each touched by its own thread only.
struct RoleCell(RoleState);

// SAFETY: each cell belongs to one engine thread (the send or the receive
// thread of this handler's engine; with `engine_threads=shared` both cells
// belong to the one shared thread, which makes the up-calls of both roles
// one after the other, never at once): it writes `env` in `thread_started`
// before its first up-call and clears it in `thread_stopping` after its
// last, and only it makes the up-calls that read the cell (and, through Java,
// write `next`). The send cell is lent: a user's thread that holds the send
// state (`msgrc::send_owner`, exclusive, acquire/release) puts its own `env`
// in, makes the send up-calls, and puts the thread's back before letting go
// (`lend_send_role`); the send thread makes no up-call meanwhile. The
// receive cell is lent the same way to a user's thread that holds the
// receive state while it waits for a response (`lend_recv_role`,
// `msgrc::recv_agent`). No two threads read or write a cell at once.
unsafe impl Sync for RoleCell {}
// SAFETY: the handler moves to the engine's threads at start; a JNIEnv in it
// is only ever used by the thread that stored it (see the `Sync` impl), and
// is null whenever that thread is not attached.
unsafe impl Send for RoleCell {}

impl RoleCell {
    fn new() -> Self {
        RoleCell(RoleState::default())
    }

    /// # Safety
    /// Only on the thread this cell belongs to (see the `Sync` impl): its
    /// `Cell`s are not meant for two threads.
    unsafe fn get(&self) -> &RoleState {
        &self.0
    }
}

/// Forwards engine callbacks to Java.
pub(crate) struct JniHandler {
    callbacks: GlobalRef,
    /// The callback method IDs (copied from the load-time cache).
    ids: CallbackIds,
    send: RoleCell,
    recv: RoleCell,
    /// The up-calls and their exception count.
    pub upcalls: Upcalls,
}

impl JniHandler {
    /// `check_every`: see [`Upcalls`].
    pub fn new(callbacks: GlobalRef, ids: CallbackIds, check_every: bool) -> Self {
        JniHandler { callbacks, ids, send: RoleCell::new(), recv: RoleCell::new(), upcalls: Upcalls::new(check_every) }
    }
}

impl JniHandler {
    /// The up-call states of the send or the receive thread, or both for
    /// the shared thread (the job thread makes only the rare `nodeEvent`,
    /// through the thread local).
    fn role_cells(&self, role: ThreadRole) -> impl Iterator<Item = &RoleCell> {
        let (send, recv) = match role {
            ThreadRole::Send => (true, false),
            ThreadRole::Recv => (false, true),
            ThreadRole::Shared => (true, true),
            ThreadRole::Job => (false, false),
        };
        send.then_some(&self.send).into_iter().chain(recv.then_some(&self.recv))
    }
}

impl EngineHandler for JniHandler {
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage {
        // SAFETY: this is the holder of the send state: the send (or shared)
        // thread, or a user's thread it was lent to (see `RoleCell`).
        let me = unsafe { self.send.get() };
        me.next.set(NextWorkPackage::default());
        let args = [
            JValue::Long(prev as *const PrevWorkResults as i64).as_jni(),
            JValue::Long(completed.address() as i64).as_jni(),
            JValue::Long(me.next.as_ptr() as i64).as_jni(),
        ];
        // SAFETY: `env` is this thread's (or null); `callbacks` implements
        // EngineCallbacks, whose nextDataToSend(JJJ)I the ID names; three longs.
        let called = unsafe {
            self.upcalls.call_int(
                me.env.get(),
                "nextDataToSend",
                self.callbacks.as_obj().as_raw(),
                self.ids.next_data_to_send.into_raw(),
                &args,
            )
        };
        match called {
            // Java has returned: the slot holds what it wrote.
            Some(_) => me.next.get(),
            None => NextWorkPackage::default(),
        }
    }

    fn acknowledges_handover(&self) -> bool {
        true // EngineCallbacks.nextDataToSend acknowledges (CompletedWorkList.acknowledge)
    }

    fn lend_send_role(&self, token: usize) -> usize {
        // SAFETY: called by the holder of the send state only (see `RoleCell`).
        let me = unsafe { self.send.get() };
        me.env.replace(token as *mut jni::sys::JNIEnv) as usize
    }

    fn lend_recv_role(&self, token: usize) -> usize {
        // SAFETY: called by the holder of the receive state only (see `RoleCell`).
        let me = unsafe { self.recv.get() };
        me.env.replace(token as *mut jni::sys::JNIEnv) as usize
    }

    fn received(&self, ring: &IncomingRing) -> u32 {
        let args = [JValue::Long(ring.address() as i64).as_jni()];
        // SAFETY: this is the holder of the receive state: the receive (or
        // shared) thread, or a waiting user's thread it was lent to.
        let env = unsafe { self.recv.get() }.env.get();
        // SAFETY: `env` is this thread's (or null); `callbacks` implements
        // EngineCallbacks, whose received(J)I the ID names; one long.
        let r = unsafe {
            self.upcalls.call_int(
                env,
                "received",
                self.callbacks.as_obj().as_raw(),
                self.ids.received.into_raw(),
                &args,
            )
        };
        // Java returns the count plus one (0 is an exception's value);
        // a 0 without an exception, or less, consumed nothing.
        r.map_or(0, |r| r.saturating_sub(1).max(0) as u32)
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
        // SAFETY: `callbacks` implements EngineCallbacks, whose nodeEvent(IIJ)V
        // the ID names; int, int, long.
        let _ = unsafe {
            self.upcalls.call_void("nodeEvent", self.callbacks.as_obj().as_raw(), self.ids.node_event.into_raw(), &args)
        };
    }

    fn thread_started(&self, role: ThreadRole) {
        let Some(c) = cached() else {
            log::error!("ibdxnet: no JVM to attach the {} thread to", role.name());
            return;
        };
        match attach_current_thread(&c.vm) {
            Ok(env) => {
                for cell in self.role_cells(role) {
                    // SAFETY: this thread is the role's: the cell's owner.
                    unsafe { cell.get() }.env.set(env);
                }
            }
            Err(rc) => log::error!("ibdxnet: attaching the {} thread to the JVM failed ({rc})", role.name()),
        }
    }

    fn thread_stopping(&self, role: ThreadRole) {
        for cell in self.role_cells(role) {
            // SAFETY: this thread is the role's: the cell's owner.
            unsafe { cell.get() }.env.set(std::ptr::null_mut());
        }
        if let Some(c) = cached() {
            detach_current_thread(&c.vm);
        }
    }
}
