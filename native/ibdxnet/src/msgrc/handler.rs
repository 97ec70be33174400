//! The engine's user ([`EngineHandler`], paper Listings 1–2) and the names
//! of the threads that call it ([`ThreadRole`]). The engine and both worker
//! threads depend on this module; it depends on none of them.

use super::shared::{CompletedList, IncomingRing};
use crate::abi::{NextWorkPackage, PrevWorkResults};
use crate::con::NodeEvent;

/// The engine's threads, as named in [`EngineHandler::thread_started`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadRole {
    /// Connection manager job thread.
    Job,
    /// Send thread.
    Send,
    /// Receive thread.
    Recv,
    /// The one thread doing the send and the receive work
    /// (`engine_threads=shared`): it makes the up-calls of both.
    Shared,
}

impl ThreadRole {
    /// Short name used in thread names.
    pub fn name(self) -> &'static str {
        match self {
            ThreadRole::Job => "job",
            ThreadRole::Send => "send",
            ThreadRole::Recv => "recv",
            ThreadRole::Shared => "shared",
        }
    }
}

/// How the send thread learns of the user's new data while it sleeps
/// ([`EngineHandler::arm_send_wakeup`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendWakeup {
    /// The user rings the doorbell after publishing (our Java reads the
    /// sleeping word and calls `sendFromCaller`, which posts on its own thread or rings).
    Doorbell,
    /// The user armed a wake-up of its own (upstream DXNet: its writes into
    /// the send rings, `sys::write_watch`) that makes `fd` readable and rings
    /// the doorbell; some data may come unseen: sleep at most `bound`.
    Watch {
        /// Readable on the user's next data (consumed by the user's side).
        fd: std::os::fd::RawFd,
        /// The longest sleep.
        bound: std::time::Duration,
    },
    /// Nothing will ring: do not block, park briefly and call again.
    Poll,
}

/// The engine's user (paper Listings 1–2). Called from the engine's threads.
pub trait EngineHandler: Send + Sync + 'static {
    /// Send thread, once per iteration: the outcome of the previous package
    /// and the confirmations since; returns the next package (flags 0 = none).
    ///
    /// If [`acknowledges_handover`](Self::acknowledges_handover) is true, the
    /// engine clears `prev` and `completed` only once this call acknowledged
    /// them ([`CompletedList::acknowledge`]); until then it hands what was not
    /// marked applied again (and posts no package), so a call that fails
    /// half-way loses and repeats nothing.
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage;
    /// A user's thread takes the send thread's part for a few iterations
    /// (`Engine::send_from_caller`): `token` is what that thread's up-calls
    /// need (JNI: its `JNIEnv`). Returns the token in place before, which
    /// the engine lends back after. Called only by the holder of the send
    /// state, so never while the send thread makes an up-call.
    fn lend_send_role(&self, token: usize) -> usize {
        token
    }
    /// The same for the receive thread's part (`Engine::recv_from_caller`:
    /// a thread waiting for a response polls the receive side itself), so
    /// `received` may come on that thread. Called only by the holder of the
    /// receive state.
    fn lend_recv_role(&self, token: usize) -> usize {
        token
    }
    /// Whether `next_data_to_send` acknowledges each hand-over itself (see
    /// there); false: every return counts as applied in full.
    fn acknowledges_handover(&self) -> bool {
        false
    }
    /// Send thread, before it sleeps (after announcing it on its doorbell,
    /// before its last look): how it learns of the user's new data.
    fn arm_send_wakeup(&self) -> SendWakeup {
        SendWakeup::Doorbell
    }
    /// Receive thread (or a waiting caller it was lent to): new entries in
    /// `ring`; returns how many entries, from the front, were consumed
    /// (their buffers are returned later).
    fn received(&self, ring: &IncomingRing) -> u32;
    /// Job thread: a node was discovered, invalidated or disconnected.
    fn node_event(&self, event: NodeEvent);
    /// Called first on each engine thread (e.g. to attach it to a JVM).
    fn thread_started(&self, _role: ThreadRole) {}
    /// Called last on each engine thread.
    fn thread_stopping(&self, _role: ThreadRole) {}
}

/// An engine thread's role (its up-call token) lent to a user's thread that
/// holds the role's state (`send_from_caller`, `recv_from_caller`), given
/// back when dropped: also on a panic, so that the engine's thread never
/// makes an up-call with a token of another thread.
pub(crate) struct Lent<'a, H: EngineHandler> {
    handler: &'a H,
    lend: fn(&H, usize) -> usize,
    before: usize,
}

impl<'a, H: EngineHandler> Lent<'a, H> {
    /// The send role ([`EngineHandler::lend_send_role`]).
    pub(crate) fn send(handler: &'a H, token: usize) -> Self {
        Self::lend(handler, H::lend_send_role, token)
    }

    /// The receive role ([`EngineHandler::lend_recv_role`]).
    pub(crate) fn recv(handler: &'a H, token: usize) -> Self {
        Self::lend(handler, H::lend_recv_role, token)
    }

    fn lend(handler: &'a H, lend: fn(&H, usize) -> usize, token: usize) -> Self {
        Lent { handler, lend, before: lend(handler, token) }
    }
}

impl<H: EngineHandler> Drop for Lent<'_, H> {
    fn drop(&mut self) {
        (self.lend)(self.handler, self.before);
    }
}
