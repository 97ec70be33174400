//! A streaming engine user (paper §7, §9.2.4): each node streams its send
//! rings round-robin to every target and consumes what it receives,
//! returning buffers at once. The loopback benchmark runs it without
//! touching the data; tests run it with a per-byte pattern and check
//! integrity and order of every stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::con::{NodeEvent, NodeId};
use crate::driver::{consume_received, SendTargets};
use crate::fabric::Fabric;
use crate::msgrc::recv_pool::RecvPool;
use crate::msgrc::{CompletedList, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults, NWP_VALID};
use crate::util::lock;

/// The byte at stream position `pos` from `src` to `dst` when verifying.
pub fn pattern_byte(src: u16, dst: u16, pos: u64) -> u8 {
    ((pos ^ (pos >> 8) ^ (pos >> 17)) as u8)
        .wrapping_add((src as u8).wrapping_mul(31))
        .wrapping_add((dst as u8).wrapping_mul(17))
}

/// What a stream to one target still has to send.
#[derive(Debug)]
struct Quota {
    /// Total bytes to send (None = unlimited).
    limit: Option<u64>,
    /// Flow-control units still to send as zero-length messages.
    fc_left: u64,
}

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
    outgoing: Mutex<SendTargets<Quota>>,
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
            outgoing: Mutex::new(SendTargets::default()),
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
    ///
    /// # Panics
    /// If it has one already: a handler serves one engine, and buffers
    /// returned to another engine's pool would be lost to both.
    pub fn set_pool(&self, pool: Arc<RecvPool<F>>) {
        assert!(self.pool.set(pool).is_ok(), "StreamHandler::set_pool: the handler serves an engine already");
    }

    /// Starts streaming to `node` through `ring`, the connection's send ring.
    ///
    /// # Safety
    /// `ring` points to that ring's `size` bytes; the caller keeps the
    /// connection (and so the ring) alive while the engine runs this handler,
    /// and gives each ring to one handler once.
    pub unsafe fn add_target(&self, node: NodeId, ring: *mut u8, size: u32) {
        let quota = Quota { limit: self.opts.limit, fc_left: self.opts.fc_only };
        // SAFETY: the caller's contract above is the one `add` asks for.
        unsafe { lock(&self.outgoing).add(node, ring, size, quota) };
    }

    /// Stops offering new data.
    pub fn stop_sending(&self) {
        self.sending.store(false, Ordering::Release);
    }

    /// True when every target's limit was sent and confirmed.
    pub fn all_confirmed(&self) -> bool {
        lock(&self.outgoing).iter().all(|o| o.state.fc_left == 0 && o.state.limit.is_some_and(|l| o.confirmed >= l))
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
        if let Some(o) = out.get_mut(prev.node_id) {
            if prev.fc_posted > 0 {
                o.state.fc_left -= 1;
            }
            if prev.bytes_not_posted > 0 {
                self.unposted_reports.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.confirmed.fetch_add(out.account(prev, completed), Ordering::Relaxed);
        if out.is_empty() || !self.sending.load(Ordering::Acquire) {
            return NextWorkPackage::default();
        }
        out.next_package(|o| {
            if o.state.fc_left > 0 {
                return Some(NextWorkPackage {
                    node_id: o.node.0,
                    fc_data: FC_UNIT,
                    flags: NWP_VALID,
                    ..Default::default()
                });
            }
            // Fill the free part of the ring, up to the limit.
            let end = o.state.limit.map_or(u64::MAX, |l| l.min(o.free_end()));
            if self.opts.verify {
                let (me, to) = (self.me.0, o.node.0);
                o.fill_to(end, |pos| pattern_byte(me, to, pos));
            } else {
                o.skip_to(end);
            }
            let avail = o.unposted();
            (avail > 0).then(|| o.package(self.next_size(avail)))
        })
    }

    fn received(&self, ring: &IncomingRing) -> u32 {
        let Some(pool) = self.pool.get() else { return 0 };
        let mut incoming = lock(&self.incoming);
        let (n, _refused) = consume_received(ring, pool, self.me, |source, fc, data| {
            let s = incoming.entry(source).or_default();
            s.fc += u64::from(fc);
            if self.opts.verify {
                let at = s.bytes;
                s.corrupt += data
                    .iter()
                    .enumerate()
                    .filter(|&(k, &b)| b != pattern_byte(source, self.me.0, at + k as u64))
                    .count() as u64;
            }
            s.bytes += data.len() as u64;
            self.received.fetch_add(data.len() as u64, Ordering::Relaxed);
        });
        n
    }

    fn node_event(&self, event: NodeEvent) {
        lock(&self.events).push(event);
    }
}
