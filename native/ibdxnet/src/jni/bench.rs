//! Natives of `io.ibdxnet.bench.JniCost` for the JNI cost table (paper
//! Figure 2). Compiled only with the `bench-natives` feature (never in the
//! product library) and registered only when that class is on the class
//! path (the benchmark source set).

use std::ffi::c_void;

use jni::objects::{GlobalRef, JByteArray, JClass, JMethodID, JObject, JValue};
use jni::signature::{Primitive, ReturnType};
use jni::sys::{jint, jlong, jvalue};
use jni::{JNIEnv, JavaVM, NativeMethod};

use super::handler::{raw_call_int, JniHandler};
use super::{cached, guarded, CallbackIds, Throw};
use crate::msgrc::{CompletedList, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults, ThreadRole};

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

/// Calls a `void` Java method through the raw JNI function table: one
/// transition, no exception check.
///
/// # Safety
/// `env` must be the current thread's environment and `method` a `void`
/// method of `obj`'s class whose parameters match `args`.
unsafe fn raw_call_void(env: &mut JNIEnv, obj: &JObject, method: JMethodID, args: &[jvalue]) {
    let raw = env.get_raw();
    // SAFETY: `raw` is this thread's live JNIEnv (caller's promise), and the
    // method, receiver and arguments agree (caller's promise).
    unsafe {
        if let Some(f) = (**raw).CallVoidMethodA {
            f(raw, obj.as_raw(), method.into_raw(), args.as_ptr());
        }
    }
}

/// Runs `count` up-calls from a fresh native thread and returns the elapsed
/// nanoseconds. `mode`: 0 = `target.callback(long)` attached once, raw JNI
/// call, no exception check (the floor); 1 = as 0 plus an `ExceptionCheck`
/// after each call (what the engine did until ABI 4); 2 = attach and detach
/// around every call; 3 = attached once, through the jni crate's checked call;
/// 4 and 5 = the engine's own code: `JniHandler::next_data_to_send` and
/// `JniHandler::received` (jni/handler.rs) on a thread attached as the engine
/// attaches its threads, with `target` as the `EngineCallbacks`; 6 and 7 =
/// their floor: the same `nextDataToSend(JJJ)I` / `received(J)I` with the same
/// method IDs and arguments, raw JNI, no exception check.
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
        let c = cached().ok_or_else(|| Throw::state("JNI not initialised"))?;
        if (4..=7).contains(&mode) && !env.is_instance_of(&target, super::CALLBACKS_CLASS)? {
            return Err(Throw::arg("modes 4 to 7 need an EngineCallbacks target"));
        }
        let vm = &c.vm;
        let ids = c.ids;
        let worker =
            std::thread::Builder::new().name("ibdxnet-jni-bench".into()).spawn(move || -> Result<u64, String> {
                if (4..=7).contains(&mode) {
                    return engine_upcalls(vm, target, ids, count, mode);
                }
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
                        // SAFETY: as above, through the raw JNI function.
                        unsafe { raw_call_void(env, target.as_obj(), method, &args) };
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

/// Modes 4 to 7 of [`upcalls`], on the calling (fresh) thread.
fn engine_upcalls(vm: &JavaVM, target: GlobalRef, ids: CallbackIds, count: jint, mode: jint) -> Result<u64, String> {
    let prev = PrevWorkResults::default();
    let completed = CompletedList::new(64).map_err(|e| e.to_string())?;
    let ring = IncomingRing::new(64).map_err(|e| e.to_string())?;
    // The engine never checks every up-call unless -Xcheck:jni or not HotSpot.
    let handler = JniHandler::new(target.clone(), ids, false);
    // The engine's own attach, as the thread of the role measured.
    let role = if mode == 5 || mode == 7 { ThreadRole::Recv } else { ThreadRole::Send };
    handler.thread_started(role);
    let raw_env = vm.get_env().map_err(|e| e.to_string())?.get_raw();
    let obj = target.as_obj().as_raw();
    let mut sink = 0u64;
    let start = std::time::Instant::now();
    match mode {
        4 => {
            for _ in 0..count {
                sink = sink.wrapping_add(u64::from(handler.next_data_to_send(&prev, &completed).length));
            }
        }
        5 => {
            for _ in 0..count {
                sink = sink.wrapping_add(u64::from(handler.received(&ring)));
            }
        }
        6 => {
            // The arguments next_data_to_send passes (its slot is a local here).
            let mut slot = NextWorkPackage::default();
            let args = [
                JValue::Long(&prev as *const PrevWorkResults as i64).as_jni(),
                JValue::Long(completed.address() as i64).as_jni(),
                JValue::Long(&mut slot as *mut NextWorkPackage as i64).as_jni(),
            ];
            for _ in 0..count {
                // SAFETY: `raw_env` is this attached thread's; `obj` implements
                // EngineCallbacks, whose nextDataToSend(JJJ)I the ID names.
                let r = unsafe { raw_call_int(raw_env, obj, ids.next_data_to_send.into_raw(), &args) };
                sink = sink.wrapping_add(r as u64);
            }
        }
        _ => {
            let args = [JValue::Long(ring.address() as i64).as_jni()];
            for _ in 0..count {
                // SAFETY: as above, for received(J)I.
                let r = unsafe { raw_call_int(raw_env, obj, ids.received.into_raw(), &args) };
                sink = sink.wrapping_add(r as u64);
            }
        }
    }
    let ns = start.elapsed().as_nanos() as u64;
    std::hint::black_box(sink);
    let exceptions = handler.upcalls.exceptions();
    handler.thread_stopping(role);
    drop(handler);
    drop(target);
    if exceptions > 0 {
        return Err(format!("{exceptions} Java exceptions in the measured up-calls"));
    }
    Ok(ns)
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
