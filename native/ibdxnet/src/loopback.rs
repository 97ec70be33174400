//! A streaming engine user (paper §7, §9.2.4): each node streams its send
//! rings round-robin to every target and consumes what it receives,
//! returning buffers at once. The loopback benchmark runs it without
//! touching the data; tests run it with a per-byte pattern and check
//! integrity and order of every stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::con::{NodeEvent, NodeId};
use crate::fabric::Fabric;
use crate::msgrc::recv_pool::RecvPool;
use crate::msgrc::{
    CompletedList, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults, NO_BUFFER, NWP_VALID,
};
use crate::util::lock;

/// The byte at stream position `pos` from `src` to `dst` when verifying.
pub fn pattern_byte(src: u16, dst: u16, pos: u64) -> u8 {
    ((pos ^ (pos >> 8) ^ (pos >> 17)) as u8)
        .wrapping_add((src as u8).wrapping_mul(31))
        .wrapping_add((dst as u8).wrapping_mul(17))
}

/// One outgoing stream: positions are absolute byte counts.
#[derive(Debug)]
struct Outgoing {
    node: NodeId,
    ring: *mut u8,
    size: u32,
    /// Bytes written into the ring (the ring's back).
    written: u64,
    /// Bytes posted (front posted).
    posted: u64,
    /// Bytes confirmed (front).
    confirmed: u64,
    /// Total bytes to send (None = unlimited).
    limit: Option<u64>,
    /// Flow-control units still to send as zero-length messages.
    fc_left: u64,
}

// SAFETY: `ring` points into a connection's send ring that the owner keeps
// alive (it holds the connection); only the send thread touches it.
unsafe impl Send for Outgoing {}

/// Per-source receive check.
#[derive(Debug, Default, Clone)]
pub struct IncomingStream {
    /// Bytes received.
    pub bytes: u64,
    /// Bytes that did not match the pattern (0 when not verifying).
    pub corrupt: u64,
    /// Flow-control data received.
    pub fc: u64,
}

/// Settings of the stream handler.
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    /// Write and check the byte pattern (tests); off for benchmarks.
    pub verify: bool,
    /// Cycle of package sizes (empty = everything available at once).
    pub package_sizes: Vec<u32>,
    /// Bytes per target (None = until stopped).
    pub limit: Option<u64>,
    /// Flow-control units to send to each target first, as zero-length
    /// messages carrying [`FC_UNIT`] each.
    pub fc_only: u64,
}

/// Flow-control value of each flow-control-only package.
pub const FC_UNIT: u8 = 3;

/// The streaming [`EngineHandler`].
pub struct StreamHandler<F: Fabric> {
    me: NodeId,
    opts: StreamOptions,
    outgoing: Mutex<Vec<Outgoing>>,
    next_target: AtomicU64,
    size_cursor: AtomicU64,
    incoming: Mutex<HashMap<u16, IncomingStream>>,
    pool: OnceLock<Arc<RecvPool<F>>>,
    events: Mutex<Vec<NodeEvent>>,
    /// Bytes confirmed sent, all targets.
    pub confirmed: AtomicU64,
    /// Bytes received, all sources.
    pub received: AtomicU64,
    /// Packages of which the engine reported bytes as not posted.
    pub unposted_reports: AtomicU64,
    sending: AtomicBool,
}

impl<F: Fabric> std::fmt::Debug for StreamHandler<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StreamHandler(node {})", self.me)
    }
}

impl<F: Fabric> StreamHandler<F> {
    /// A handler for node `me`.
    pub fn new(me: NodeId, opts: StreamOptions) -> Arc<Self> {
        Arc::new(StreamHandler {
            me,
            opts,
            outgoing: Mutex::new(Vec::new()),
            next_target: AtomicU64::new(0),
            size_cursor: AtomicU64::new(0),
            incoming: Mutex::new(HashMap::new()),
            pool: OnceLock::new(),
            events: Mutex::new(Vec::new()),
            confirmed: AtomicU64::new(0),
            received: AtomicU64::new(0),
            unposted_reports: AtomicU64::new(0),
            sending: AtomicBool::new(true),
        })
    }

    /// Gives the handler the engine's buffer pool (to return buffers).
    pub fn set_pool(&self, pool: Arc<RecvPool<F>>) {
        let _ = self.pool.set(pool);
    }

    /// Starts streaming to `node` through `ring` (the connection's send
    /// ring, which the caller keeps alive by holding the connection).
    pub fn add_target(&self, node: NodeId, ring: *mut u8, size: u32) {
        lock(&self.outgoing).push(Outgoing {
            node,
            ring,
            size,
            written: 0,
            posted: 0,
            confirmed: 0,
            limit: self.opts.limit,
            fc_left: self.opts.fc_only,
        });
    }

    /// Stops offering new data.
    pub fn stop_sending(&self) {
        self.sending.store(false, Ordering::Release);
    }

    /// True when every target's limit was sent and confirmed.
    pub fn all_confirmed(&self) -> bool {
        lock(&self.outgoing).iter().all(|o| o.fc_left == 0 && o.limit.is_some_and(|l| o.confirmed >= l))
    }

    /// (node, written, posted, confirmed) per target, for diagnostics.
    pub fn debug_state(&self) -> Vec<(u16, u64, u64, u64)> {
        lock(&self.outgoing).iter().map(|o| (o.node.0, o.written, o.posted, o.confirmed)).collect()
    }

    /// Receive statistics per source node.
    pub fn incoming(&self) -> HashMap<u16, IncomingStream> {
        lock(&self.incoming).clone()
    }

    /// Node events seen so far.
    pub fn events(&self) -> Vec<NodeEvent> {
        lock(&self.events).clone()
    }

    fn next_size(&self, avail: u64) -> u64 {
        if self.opts.package_sizes.is_empty() {
            return avail;
        }
        let i = self.size_cursor.fetch_add(1, Ordering::Relaxed) as usize % self.opts.package_sizes.len();
        avail.min(u64::from(self.opts.package_sizes[i]))
    }
}

impl<F: Fabric> EngineHandler for StreamHandler<F> {
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage {
        let mut out = lock(&self.outgoing);
        if prev.node_id != 0xFFFF {
            if let Some(o) = out.iter_mut().find(|o| o.node.0 == prev.node_id) {
                o.posted += u64::from(prev.bytes_posted);
                if prev.fc_posted > 0 {
                    o.fc_left -= 1;
                }
            }
            if prev.bytes_not_posted > 0 {
                self.unposted_reports.fetch_add(1, Ordering::Relaxed);
            }
        }
        for c in completed.entries() {
            if let Some(o) = out.iter_mut().find(|o| o.node.0 == c.node_id) {
                o.confirmed += u64::from(c.bytes);
                self.confirmed.fetch_add(u64::from(c.bytes), Ordering::Relaxed);
            }
        }
        if out.is_empty() || !self.sending.load(Ordering::Acquire) {
            return NextWorkPackage::default();
        }
        let n = out.len();
        let start = self.next_target.fetch_add(1, Ordering::Relaxed) as usize;
        for k in 0..n {
            let o = &mut out[(start + k) % n];
            if o.fc_left > 0 {
                return NextWorkPackage { node_id: o.node.0, fc_data: FC_UNIT, flags: NWP_VALID, ..Default::default() };
            }
            // Fill the free part of the ring: [written, confirmed + size).
            let mut back = o.confirmed + u64::from(o.size);
            if let Some(l) = o.limit {
                back = back.min(l);
            }
            if self.opts.verify {
                while o.written < back {
                    let at = (o.written % u64::from(o.size)) as usize;
                    let b = pattern_byte(self.me.0, o.node.0, o.written);
                    // SAFETY: `at` < size; the area [confirmed, confirmed+size)
                    // past `written` is free (not posted), see the ORB rules.
                    unsafe { *o.ring.add(at) = b };
                    o.written += 1;
                }
            } else {
                o.written = back;
            }
            let avail = o.written - o.posted;
            if avail == 0 {
                continue;
            }
            let len = self.next_size(avail);
            return NextWorkPackage {
                node_id: o.node.0,
                fc_data: 0,
                flags: NWP_VALID,
                offset: (o.posted % u64::from(o.size)) as u32,
                length: len as u32,
                connection: 0,
            };
        }
        NextWorkPackage::default()
    }

    fn received(&self, ring: &IncomingRing) -> u32 {
        let Some(pool) = self.pool.get() else { return 0 };
        let mut incoming = lock(&self.incoming);
        let n = ring.used();
        for i in 0..n {
            let e = ring.get(i).expect("i < used");
            let s = incoming.entry(e.source_node_id).or_default();
            s.fc += u64::from(e.fc_data);
            if e.buffer_id == NO_BUFFER {
                continue;
            }
            if self.opts.verify {
                // SAFETY: the entry's buffer holds `data_length` received bytes
                // and belongs to us until returned below.
                let data = unsafe { std::slice::from_raw_parts(e.data_address as *const u8, e.data_length as usize) };
                for (k, &b) in data.iter().enumerate() {
                    if b != pattern_byte(e.source_node_id, self.me.0, s.bytes + k as u64) {
                        s.corrupt += 1;
                    }
                }
            }
            s.bytes += u64::from(e.data_length);
            self.received.fetch_add(u64::from(e.data_length), Ordering::Relaxed);
            if let Err(err) = pool.give_back(e.buffer_id) {
                log::error!("node {}: {err}", self.me);
            }
        }
        n
    }

    fn node_event(&self, event: NodeEvent) {
        lock(&self.events).push(event);
    }
}
