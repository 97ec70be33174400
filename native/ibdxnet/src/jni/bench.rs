//! Natives of `io.ibdxnet.bench.JniCost` for the JNI cost table (paper
//! Figure 2). Compiled only with the `bench-natives` feature (never in the
//! product library) and registered only when that class is on the class
//! path (the benchmark source set).

use std::ffi::c_void;

use jni::objects::{JByteArray, JClass, JObject, JValue};
use jni::signature::{Primitive, ReturnType};
use jni::sys::{jint, jlong};
use jni::{JNIEnv, NativeMethod};

use super::{cached, guarded, Throw};

/// Class holding the benchmark natives.
pub const BENCH_CLASS: &str = "io/ibdxnet/bench/JniCost";

extern "system" fn noop<'l>(_env: JNIEnv<'l>, _c: JClass<'l>) {}

extern "system" fn with_args<'l>(_env: JNIEnv<'l>, _c: JClass<'l>, a: jlong, b: jint, c: jlong) -> jlong {
    a.wrapping_add(jlong::from(b)).wrapping_add(c)
}

/// Copies a Java byte[] into native memory at `address` (the "byte[] across
/// JNI" access path).
extern "system" fn copy_in<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, array: JByteArray<'l>, address: jlong) {
    guarded(&mut env, (), |env| {
        let len = env.get_array_length(&array)? as usize;
        // SAFETY: the caller passes `address` of at least `len` writable bytes.
        let dst = unsafe { std::slice::from_raw_parts_mut(address as *mut i8, len) };
        env.get_byte_array_region(&array, 0, dst)?;
        Ok(())
    })
}

/// Runs `count` up-calls of `target.callback(long)` from a fresh native
/// thread and returns the elapsed nanoseconds. `mode`: 0 = attached once,
/// raw JNI call, no exception check; 1 = as 0 plus an exception check after
/// each call (what the engine's up-calls do); 2 = attach and detach around
/// every call; 3 = attached once, through the jni crate's checked call (the
/// alternative the engine does not use, for comparison).
extern "system" fn upcalls<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    target: JObject<'l>,
    count: jint,
    mode: jint,
) -> jlong {
    guarded(&mut env, -1, |env| {
        let target = env.new_global_ref(&target)?;
        let class = env.get_object_class(&target)?;
        let method = env.get_method_id(&class, "callback", "(J)V")?;
        let vm = &cached().ok_or_else(|| Throw::state("JNI not initialised"))?.vm;
        let worker =
            std::thread::Builder::new().name("ibdxnet-jni-bench".into()).spawn(move || -> Result<u64, String> {
                let call = |env: &mut JNIEnv, i: jint| {
                    let args = [JValue::Long(jlong::from(i)).as_jni()];
                    if mode == 3 {
                        // Through the jni crate (which checks for an exception itself).
                        // Its result (void, or the exception the crate found) is
                        // not what is measured: the call's cost is.
                        // SAFETY: `method` is callback(J)V of the target's class.
                        let _ = unsafe {
                            env.call_method_unchecked(
                                target.as_obj(),
                                method,
                                ReturnType::Primitive(Primitive::Void),
                                &args,
                            )
                        };
                    } else {
                        // SAFETY: as above; the raw JNI function, as the engine's handler uses it.
                        unsafe { super::handler::raw_call_void(env, target.as_obj(), method, &args) };
                    }
                };
                let start = std::time::Instant::now();
                if mode == 2 {
                    for i in 0..count {
                        let mut guard = vm.attach_current_thread().map_err(|e| e.to_string())?;
                        call(&mut guard, i);
                    }
                } else {
                    let mut env = vm.attach_current_thread_as_daemon().map_err(|e| e.to_string())?;
                    for i in 0..count {
                        call(&mut env, i);
                        if mode == 1 && env.exception_check().unwrap_or(false) {
                            // Errs only if the JNIEnv lacks ExceptionClear: nothing to do then.
                            let _ = env.exception_clear();
                        }
                    }
                }
                Ok(start.elapsed().as_nanos() as u64)
            });
        let handle = worker.map_err(|e| Throw::state(e.to_string()))?;
        let ns = handle.join().map_err(|_| Throw::state("benchmark thread panicked"))?.map_err(Throw::state)?;
        Ok(ns as jlong)
    })
}

/// Registers the natives if the benchmark class is present.
pub(crate) fn register(env: &mut JNIEnv) {
    let Ok(class) = env.find_class(BENCH_CLASS) else {
        // Not a benchmark run. (exception_clear errs only if the JNIEnv
        // lacks ExceptionClear: nothing to do then.)
        let _ = env.exception_clear();
        return;
    };
    let m = |name: &str, sig: &str, f: *mut c_void| NativeMethod { name: name.into(), sig: sig.into(), fn_ptr: f };
    let methods = [
        m("noop", "()V", noop as *mut c_void),
        m("withArgs", "(JIJ)J", with_args as *mut c_void),
        m("copyIn", "([BJ)V", copy_in as *mut c_void),
        m("upcalls", "(Ljava/lang/Object;II)J", upcalls as *mut c_void),
    ];
    if let Err(e) = env.register_native_methods(&class, &methods) {
        // The JMH run then fails calling them; the engine's load goes on.
        // (exception_clear errs only if the JNIEnv lacks ExceptionClear.)
        let _ = env.exception_clear();
        log::warn!("ibdxnet: registering the JNI benchmark natives failed: {e}");
    }
}
