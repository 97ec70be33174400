//! The connections upstream Java holds. Upstream has no close or release
//! native: from `createConnection` (or `getSendBufferAddress`) on, Java
//! writes into the node's send ring until `nodeDisconnected` makes it drop the
//! connection. So the library keeps an `Arc<Connection>` per node, and a
//! replaced one (its ring) for [`RETIRE_GRACE`] more, as Java threads that
//! took the old connection before the event may still be copying into it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::con::Connection;
use crate::fabric::Fabric;
use crate::sys::write_watch::WriteWatch;
use crate::util::lock;

/// The QPN of a node whose connection Java was told is gone: matches no
/// connection (queue pair numbers have 24 bits).
pub const GONE: u32 = u32::MAX;

/// How long a replaced connection's ring stays mapped after Java was told.
pub const RETIRE_GRACE: Duration = Duration::from_secs(60);

/// Per node: the connection Java holds, and its queue pair number for the
/// send thread's lock-free look-ups.
pub struct Held<F: Fabric> {
    /// By node id: the local QPN of the connection Java holds (0 = none).
    qpn_of: Box<[AtomicU32]>,
    inner: Mutex<Inner<F>>,
    /// Rings the send thread's doorbell on Java's first write into a ring
    /// Java holds (set once the engine runs; none where the kernel refuses).
    watch: Mutex<Option<WriteWatch>>,
}

struct Inner<F: Fabric> {
    by_node: HashMap<u16, Arc<Connection<F>>>,
    retired: Vec<(Instant, Arc<Connection<F>>)>,
}

impl<F: Fabric> Default for Held<F> {
    fn default() -> Self {
        Held {
            qpn_of: (0..=u16::MAX).map(|_| AtomicU32::new(0)).collect(),
            inner: Mutex::new(Inner { by_node: HashMap::new(), retired: Vec::new() }),
            watch: Mutex::new(None),
        }
    }
}

impl<F: Fabric> Held<F> {
    /// The local QPN of the connection Java holds to `node`: 0 if it never held
    /// one (the send thread then posts without checking, as upstream did),
    /// [`GONE`] after `nodeDisconnected`.
    #[inline]
    pub fn qpn(&self, node: u16) -> u32 {
        self.qpn_of[node as usize].load(Ordering::Acquire)
    }

    /// Java now holds `c` for its node (replacing, and retiring, another).
    pub fn hold(&self, c: Arc<Connection<F>>) {
        let node = c.node().0;
        let mut g = lock(&self.inner);
        let now = Instant::now();
        g.retired.retain(|(since, _)| now.duration_since(*since) < RETIRE_GRACE);
        self.qpn_of[node as usize].store(c.local_qpn(), Ordering::Release);
        match g.by_node.insert(node, c.clone()) {
            Some(old) if Arc::ptr_eq(&old, &c) => {}
            old => {
                self.watch_ring(&c);
                if let Some(old) = old {
                    self.unwatch_ring(&old);
                    g.retired.push((now, old));
                }
            }
        }
    }

    /// Watches Java's writes into rings (`sys::write_watch`): the rings held
    /// now and from now on.
    pub fn set_watch(&self, w: WriteWatch) {
        let g = lock(&self.inner);
        *lock(&self.watch) = Some(w);
        for c in g.by_node.values() {
            self.watch_ring(c);
        }
    }

    /// Write-protects the held rings before the send thread sleeps: the
    /// descriptor that becomes readable on Java's next write into any of them
    /// (which also rings the doorbell), or None (no watch, or arming failed).
    /// None also while a ring Java holds is not watched (the kernel refused
    /// it): the send thread then polls.
    pub fn arm_watch(&self) -> Option<std::os::fd::RawFd> {
        let g = lock(&self.inner);
        let w = lock(&self.watch);
        let w = w.as_ref()?;
        if g.by_node.values().any(|c| !w.is_watching(c.ring().address())) {
            return None;
        }
        w.arm().then(|| w.fault_fd())
    }

    /// Faults the ring watch took (Java's writes that woke the send
    /// thread), or None without a watch.
    pub fn watch_faults(&self) -> Option<u64> {
        lock(&self.watch).as_ref().map(WriteWatch::faults)
    }

    fn watch_ring(&self, c: &Connection<F>) {
        if let Some(w) = lock(&self.watch).as_ref() {
            let (addr, len) = (c.ring().address(), c.ring().size() as usize);
            // SAFETY: the ring stays mapped while it is watched: this `Held`
            // keeps `c` (by node or retired) until `unwatch_ring`, or `clear`
            // drops the watch first.
            if let Err(e) = unsafe { w.watch(addr, len) } {
                log::warn!("compat: watching the ring of node {} failed ({e}): the send thread polls it", c.node());
            }
        }
    }

    fn unwatch_ring(&self, c: &Connection<F>) {
        if let Some(w) = lock(&self.watch).as_ref() {
            w.unwatch(c.ring().address());
        }
    }

    /// The connection Java holds to `node` if it is established.
    pub fn established(&self, node: u16) -> Option<Arc<Connection<F>>> {
        lock(&self.inner).by_node.get(&node).filter(|c| c.is_established()).cloned()
    }

    /// After a close event of `node`: if the connection Java holds is no
    /// longer established, Java must hear `nodeDisconnected` (true) and the
    /// connection is retired. Its QPN becomes [`GONE`] until Java holds a new
    /// connection: packages Java still offers for the old ring are not posted,
    /// and confirmations of the old ring (a drained connection's work requests
    /// still complete) are not listed — upstream Java would apply them to the
    /// connection it creates next. False if Java holds none (upstream Java
    /// would throw on a null connection) or the one it holds is still up (the
    /// event was about an older one).
    pub fn on_closed(&self, node: u16) -> bool {
        let mut g = lock(&self.inner);
        let gone = g.by_node.get(&node).is_some_and(|c| !c.is_established());
        if gone {
            self.qpn_of[node as usize].store(GONE, Ordering::Release);
            if let Some(c) = g.by_node.remove(&node) {
                self.unwatch_ring(&c);
                g.retired.push((Instant::now(), c));
            }
        }
        gone
    }

    /// Connections held and retired (statistics, tests).
    pub fn counts(&self) -> (usize, usize) {
        let g = lock(&self.inner);
        (g.by_node.len(), g.retired.len())
    }

    /// Drops everything (shutdown, after the engine's threads stopped).
    pub fn clear(&self) {
        lock(&self.watch).take(); // unwatches all, stops its thread
        let mut g = lock(&self.inner);
        g.by_node.clear();
        g.retired.clear();
    }
}
