//! The engine's counters ([`EngineStats`]), shared by the engine and its
//! send and receive threads, and their names in the statistics map.

use std::sync::atomic::{AtomicU64, Ordering};

/// Engine counters.
#[derive(Debug, Default)]
pub struct EngineStats {
    /// Send WRs posted.
    pub wrs_sent: AtomicU64,
    /// Payload bytes posted.
    pub bytes_sent: AtomicU64,
    /// Payload bytes received.
    pub bytes_received: AtomicU64,
    /// Receive completions.
    pub messages_received: AtomicU64,
    /// Failed completions and polls.
    pub errors: AtomicU64,
    /// Threads that ended by a panic.
    pub thread_panics: AtomicU64,
    /// Messages whose immediate data named another node than the one of
    /// their queue pair (each closes that connection).
    pub protocol_violations: AtomicU64,
    /// Loop iterations of the send thread.
    pub send_iterations: AtomicU64,
    /// Times the send thread blocked until woken.
    pub send_sleeps: AtomicU64,
    /// Loop iterations of the receive thread.
    pub recv_iterations: AtomicU64,
    /// Times the receive thread blocked until woken.
    pub recv_sleeps: AtomicU64,
}

impl EngineStats {
    pub(crate) fn add_sent(&self, wrs: u64, bytes: u64) {
        self.wrs_sent.fetch_add(wrs, Ordering::Relaxed);
        self.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
    }
    pub(crate) fn add_received(&self, bytes: u64) {
        self.messages_received.fetch_add(1, Ordering::Relaxed);
        self.bytes_received.fetch_add(bytes, Ordering::Relaxed);
    }
}

impl EngineStats {
    /// The counters by their names in the statistics map.
    pub fn entries(&self) -> [(&'static str, u64); 11] {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("wrs_sent", l(&self.wrs_sent)),
            ("bytes_sent", l(&self.bytes_sent)),
            ("bytes_received", l(&self.bytes_received)),
            ("messages_received", l(&self.messages_received)),
            ("errors", l(&self.errors)),
            ("thread_panics", l(&self.thread_panics)),
            ("protocol_violations", l(&self.protocol_violations)),
            ("send_iterations", l(&self.send_iterations)),
            ("send_sleeps", l(&self.send_sleeps)),
            ("recv_iterations", l(&self.recv_iterations)),
            ("recv_sleeps", l(&self.recv_sleeps)),
        ]
    }
}
