//! The JNI binding (paper §5, §8): `JNI_OnLoad` caches the VM and the
//! callback method IDs and registers the natives of
//! `io.ibdxnet.ib.IbdxnetNative`; engines live behind `long` handles.
//!
//! Every native runs inside [`guarded`]: errors become Java exceptions and a
//! panic becomes a `java.lang.Error`; nothing unwinds into the JVM.
//!
//! When the loading class loader has no `io.ibdxnet.ib.NativeLibrary` (upstream
//! DXNet's `DXNetMain` loads every file of its `jni` directory, NIO included),
//! `JNI_OnLoad` registers nothing and succeeds: only the exported natives of
//! upstream's `de.hhu.bsinfo.dxnet.ib.MsgrcJNIBinding` ([`compat`]) serve then.
//!
//! The natives of the JNI cost benchmark (`io.ibdxnet.bench.JniCost`) are
//! compiled in only with the `bench-natives` feature, which only the JMH
//! build (`gradle jmh`, `./ibdxnet bench jni`) turns on.

#[cfg(feature = "bench-natives")]
mod bench;
pub mod compat;
mod handler;
pub mod logbridge;
mod natives;

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use jni::objects::{JClass, JMethodID};
use jni::sys::{jint, JNI_ERR, JNI_VERSION_1_8};
use jni::{JNIEnv, JavaVM};

/// Class holding the natives.
pub const NATIVE_CLASS: &str = "io/ibdxnet/ib/IbdxnetNative";
/// Interface the engine calls back.
pub const CALLBACKS_CLASS: &str = "io/ibdxnet/ib/EngineCallbacks";
/// Checked exception for failed engine operations.
pub const EXCEPTION_CLASS: &str = "io/ibdxnet/ib/IbException";
/// Its subclass for a peer that refused us (authentication): Java tells
/// callers `REFUSED` rather than `UNREACHABLE`.
pub const REFUSED_CLASS: &str = "io/ibdxnet/ib/IbRefusedException";
/// Class that loads the library and checks [`LIBRARY_VERSION`].
pub const LIBRARY_CLASS: &str = "io/ibdxnet/ib/NativeLibrary";
/// What this library is, as the jar checks it: the crate version and the
/// native ABI number (`nativeAbi` in `gradle.properties`).
pub const LIBRARY_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " abi ", env!("IBDXNET_NATIVE_ABI"));

/// Method IDs of `EngineCallbacks`, looked up once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallbackIds {
    pub next_data_to_send: JMethodID,
    pub received: JMethodID,
    pub node_event: JMethodID,
}

pub(crate) struct Cached {
    pub vm: JavaVM,
    pub ids: CallbackIds,
}

static CACHED: OnceLock<Cached> = OnceLock::new();

pub(crate) fn cached() -> Option<&'static Cached> {
    CACHED.get()
}

/// An error to throw into Java.
#[derive(Debug)]
pub(crate) struct Throw {
    pub class: &'static str,
    pub msg: String,
}

impl Throw {
    pub fn ib(msg: impl Into<String>) -> Throw {
        Throw { class: EXCEPTION_CLASS, msg: msg.into() }
    }
    pub fn arg(msg: impl Into<String>) -> Throw {
        Throw { class: "java/lang/IllegalArgumentException", msg: msg.into() }
    }
    pub fn state(msg: impl Into<String>) -> Throw {
        Throw { class: "java/lang/IllegalStateException", msg: msg.into() }
    }
}

impl From<crate::con::ConError> for Throw {
    fn from(e: crate::con::ConError) -> Self {
        let class = match e {
            crate::con::ConError::Auth { .. } => REFUSED_CLASS,
            // A connect that the engine's close ended: the race Java expects as closed.
            crate::con::ConError::ShutDown => "io/ibdxnet/ib/EngineClosedException",
            _ => EXCEPTION_CLASS,
        };
        Throw { class, msg: e.to_string() }
    }
}

impl From<jni::errors::Error> for Throw {
    fn from(e: jni::errors::Error) -> Self {
        Throw::state(format!("JNI: {e}"))
    }
}

/// Runs a native's body: `Err` is thrown as the named exception, a panic as
/// `java.lang.Error`; either way `fallback` is returned to the JVM.
pub(crate) fn guarded<'l, R>(
    env: &mut JNIEnv<'l>,
    fallback: R,
    body: impl FnOnce(&mut JNIEnv<'l>) -> Result<R, Throw>,
) -> R {
    match catch_unwind(AssertUnwindSafe(|| body(env))) {
        Ok(Ok(v)) => v,
        Ok(Err(t)) => {
            if !env.exception_check().unwrap_or(false) {
                if let Err(e) = env.throw_new(t.class, &t.msg) {
                    // Nothing else can reach Java: at least the log has it.
                    log::error!("ibdxnet: cannot throw {} ({e}): {}", t.class, t.msg);
                }
            }
            fallback
        }
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            log::error!("ibdxnet: panic in a native method: {msg}");
            if !env.exception_check().unwrap_or(false) {
                if let Err(e) = env.throw_new("java/lang/Error", format!("ibdxnet internal error: {msg}")) {
                    log::error!("ibdxnet: cannot throw java.lang.Error ({e}) for the panic above");
                }
            }
            fallback
        }
    }
}

/// Why `JNI_OnLoad` failed (logged; the JVM then refuses the library).
#[derive(Debug, thiserror::Error)]
enum LoadError {
    /// A JNI call failed (the VM pointer, its environment, a string).
    #[error("{what}: {source}")]
    Jni {
        /// The call: `JavaVM::from_raw`, `GetEnv`, `NewStringUTF`.
        what: &'static str,
        /// The JNI error.
        source: jni::errors::Error,
    },
    /// A class the library needs is not there.
    #[error("{class}: {source}")]
    Class {
        /// The class.
        class: &'static str,
        /// The JNI error.
        source: jni::errors::Error,
    },
    /// A method of a class the library needs is not there, or calling it failed.
    #[error("{class}.{method}{sig}: {source}")]
    Method {
        /// The class.
        class: &'static str,
        /// The method.
        method: &'static str,
        /// Its JNI signature.
        sig: &'static str,
        /// The JNI error.
        source: jni::errors::Error,
    },
    /// The jar threw from `checkLibraryVersion` (the exception stays pending).
    #[error("the jar refused library version {}", LIBRARY_VERSION)]
    VersionRefused,
    /// `JNI_OnLoad` ran before in this process: the JVM loads a library for
    /// one class loader at a time, so the first one was unloaded, and the
    /// callback method IDs cached for its classes would be stale.
    #[error(
        "the library was loaded before in this process, by a class loader since unloaded; \
         its cached callback methods would be stale (load ibdxnet from one class loader only)"
    )]
    Reloaded,
    /// Registering the natives failed.
    #[error("RegisterNatives on {}: {0}", NATIVE_CLASS)]
    Register(jni::errors::Error),
}

/// Hands [`LIBRARY_VERSION`] to the jar before anything is registered: a jar
/// built for another library throws (left pending: the JVM rethrows it from
/// `System.load`), so a mismatch is one clear error, not a failed registration.
fn check_version(env: &mut JNIEnv) -> Result<(), LoadError> {
    let (class, method, sig) = (LIBRARY_CLASS, "checkLibraryVersion", "(Ljava/lang/String;)V");
    let c = env.find_class(class).map_err(|source| LoadError::Class { class, source })?;
    let version = env.new_string(LIBRARY_VERSION).map_err(|source| LoadError::Jni { what: "NewStringUTF", source })?;
    let r = env.call_static_method(&c, method, sig, &[(&version).into()]);
    if env.exception_check().unwrap_or(false) {
        return Err(LoadError::VersionRefused);
    }
    r.map(|_| ()).map_err(|source| LoadError::Method { class, method, sig, source })
}

/// Whether the loading class loader sees `class`; a lookup failure's pending
/// `NoClassDefFoundError` is cleared.
fn class_present(env: &mut JNIEnv, class: &str) -> bool {
    match env.find_class(class) {
        Ok(c) => {
            // A local reference of JNI_OnLoad's frame: freed now, not at its end.
            let _ = env.delete_local_ref(c);
            true
        }
        Err(_) => {
            if env.exception_check().unwrap_or(false) {
                let _ = env.exception_clear();
            }
            false
        }
    }
}

/// What `JNI_OnLoad` set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loaded {
    /// The io.ibdxnet natives are registered.
    Ibdxnet,
    /// No io.ibdxnet jar: only upstream's exported natives ([`compat`]).
    UpstreamOnly,
}

fn on_load(vm: JavaVM) -> Result<Loaded, LoadError> {
    let mut env = vm.get_env().map_err(|source| LoadError::Jni { what: "GetEnv", source })?;
    if !class_present(&mut env, LIBRARY_CLASS) {
        return Ok(Loaded::UpstreamOnly);
    }
    if CACHED.get().is_some() {
        return Err(LoadError::Reloaded);
    }
    check_version(&mut env)?;
    let class = CALLBACKS_CLASS;
    let cb: JClass = env.find_class(class).map_err(|source| LoadError::Class { class, source })?;
    let mut id = |method: &'static str, sig: &'static str| {
        env.get_method_id(&cb, method, sig).map_err(|source| LoadError::Method { class, method, sig, source })
    };
    let ids = CallbackIds {
        next_data_to_send: id("nextDataToSend", "(JJJ)I")?,
        received: id("received", "(J)I")?,
        node_event: id("nodeEvent", "(IIJ)V")?,
    };
    natives::register(&mut env).map_err(LoadError::Register)?;
    #[cfg(feature = "bench-natives")]
    bench::register(&mut env);
    CACHED.set(Cached { vm, ids }).map_err(|_| LoadError::Reloaded)?;
    Ok(Loaded::Ibdxnet)
}

/// Called by the JVM when the library is loaded.
///
/// # Safety
/// Called by the JVM with a valid `JavaVM` pointer.
#[no_mangle]
pub unsafe extern "system" fn JNI_OnLoad(vm: *mut jni::sys::JavaVM, _reserved: *mut c_void) -> jint {
    // Records go to stderr until the jar's drain thread takes them to
    // `System.Logger` ([`logbridge`]); in upstream-compat mode they stay there.
    // Fails only if the process already has a logger (an embedding
    // application's), which then gets the library's records: right as is.
    // The statistics lines (INFO) show: they are printed only when asked for
    // (`stats_print_interval_ms`).
    let filter = "warn,ibdxnet::stats=info";
    let _ = logbridge::install(filter);
    let outcome = catch_unwind(|| {
        // SAFETY: the JVM passes its own, valid VM pointer.
        let vm =
            unsafe { JavaVM::from_raw(vm) }.map_err(|source| LoadError::Jni { what: "JavaVM::from_raw", source })?;
        on_load(vm)
    });
    match outcome {
        Ok(Ok(Loaded::Ibdxnet)) => JNI_VERSION_1_8,
        Ok(Ok(Loaded::UpstreamOnly)) => {
            log::debug!(
                "ibdxnet: no {LIBRARY_CLASS} in the loading class loader: only the natives of upstream's \
                 MsgrcJNIBinding are served"
            );
            JNI_VERSION_1_8
        }
        Ok(Err(e)) => {
            log::error!("ibdxnet: JNI_OnLoad failed: {e}");
            JNI_ERR
        }
        Err(_) => {
            log::error!("ibdxnet: JNI_OnLoad panicked");
            JNI_ERR
        }
    }
}

#[cfg(test)]
mod tests {
    /// docs/deployment.md quotes the version line the library reports on load.
    #[test]
    fn docs_quote_the_library_version_line() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/deployment.md")).unwrap();
        let quoted = format!("now `{}`", super::LIBRARY_VERSION);
        assert!(doc.contains(&quoted), "docs/deployment.md should say {quoted:?} (gradle.properties changed?)");
    }
}
