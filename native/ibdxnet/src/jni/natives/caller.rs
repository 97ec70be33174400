//! The natives a user's thread calls to take an engine thread's part: post
//! its own data (`sendFromCaller`), poll the receive side while it waits for
//! a response (`receiveBegin`, `receiveFromCaller`, `receiveEnd`). Each
//! passes the thread's `JNIEnv` as the token its up-calls use.

use jni::objects::JClass;
use jni::sys::{jboolean, jint, jlong};
use jni::JNIEnv;

use super::slot::{engine, AnyEngine};
use crate::jni::guarded;
use crate::msgrc::CallerPoll;

pub(super) extern "system" fn wake_send_thread<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) {
    guarded(&mut env, (), |_| {
        with_native!(engine(handle)?, |n| n.engine.wake_send());
        Ok(())
    })
}

/// After Java published data on its own thread (the send thread's word was
/// not 0): posts it on this thread if the send thread is idle or asleep
/// and `bytes` (the record's) are few, else leaves it to the send thread
/// (`Engine::send_from_caller`). The
/// up-calls on the way use this thread's `env`.
pub(super) extern "system" fn send_from_caller<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong, bytes: jint) {
    let token = env.get_raw() as usize;
    guarded(&mut env, (), |_| {
        with_native!(engine(handle)?, |n| n.engine.send_from_caller(token, bytes.max(0) as u32));
        Ok(())
    })
}

/// This thread starts waiting for a response and polls the receive side
/// itself (`Engine::recv_begin`); false with `recv_from_caller=false`
/// (then nothing to end).
pub(super) extern "system" fn receive_begin<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) -> jboolean {
    guarded(&mut env, 0, |_| Ok(with_native!(engine(handle)?, |n| n.engine.recv_begin()) as jboolean))
}

/// One receive iteration on this thread (`Engine::recv_from_caller`): the
/// work it did (>= 0), -1 if another thread runs the receive work now, -2
/// once the engine stopped. `received` up-calls come on this thread.
pub(super) extern "system" fn receive_from_caller<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) -> jint {
    let token = env.get_raw() as usize;
    guarded(&mut env, -2, |_| {
        Ok(match with_native!(engine(handle)?, |n| n.engine.recv_from_caller(token)) {
            CallerPoll::Ran(work) => work.min(i32::MAX as usize) as jint,
            CallerPoll::Held => -1,
            CallerPoll::Stopped => -2,
        })
    })
}

/// The waiting ends (`Engine::recv_end`), once per true `receiveBegin`.
pub(super) extern "system" fn receive_end<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, handle: jlong) {
    let token = env.get_raw() as usize;
    guarded(&mut env, (), |_| {
        with_native!(engine(handle)?, |n| n.engine.recv_end(token));
        Ok(())
    })
}
