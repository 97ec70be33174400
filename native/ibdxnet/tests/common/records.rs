//! An engine user that streams sequence-numbered, checksummed records of
//! random sizes to each target and checks every record it receives: per
//! source, lost, duplicated and reordered records and bad checksums are
//! counted. Packages are cut at random lengths, so records span packages,
//! work requests and receive buffers.
#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::driver::{consume_received, SendTargets};
use ibdxnet::fabric::Fabric;
use ibdxnet::msgrc::recv_pool::RecvPool;
use ibdxnet::msgrc::{CompletedList, EngineHandler, IncomingRing, NextWorkPackage, PrevWorkResults};

const MAGIC: u32 = 0x5EC0_4D5A;
/// magic u32, sequence number u64, payload length u32, checksum u32.
pub const HEADER: usize = 20;
/// Largest payload of one record.
pub const MAX_PAYLOAD: u32 = 60_000;

/// xorshift64.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// FNV-1a over the sequence number, the length and the payload.
fn checksum(seq: u64, payload: &[u8]) -> u32 {
    let mut h = 0x811C_9DC5u32;
    for &b in seq.to_le_bytes().iter().chain((payload.len() as u32).to_le_bytes().iter()).chain(payload) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h
}

/// Record `seq` from `src` to `dst` with a random payload size.
fn make_record(src: u16, dst: u16, seq: u64, sizes: &mut Rng, out: &mut Vec<u8>) {
    let len = match sizes.below(100) {
        0..=69 => sizes.below(257),
        70..=94 => 257 + sizes.below(8192),
        _ => 8192 + sizes.below(u64::from(MAX_PAYLOAD) - 8191),
    } as usize;
    let mut fill = Rng((u64::from(src) << 48 | u64::from(dst) << 32) ^ seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    out.clear();
    out.resize(HEADER, 0);
    out.extend((0..len).map(|_| fill.next() as u8));
    let sum = checksum(seq, &out[HEADER..]);
    out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    out[4..12].copy_from_slice(&seq.to_le_bytes());
    out[12..16].copy_from_slice(&(len as u32).to_le_bytes());
    out[16..20].copy_from_slice(&sum.to_le_bytes());
}

/// A record stream's own state.
struct Records {
    /// Records written into the ring (the next sequence number).
    next_seq: u64,
    /// The next record, made but not yet fitting the ring.
    pending: Vec<u8>,
    sizes: Rng,
}

/// What one receiver saw from one source.
#[derive(Debug, Default, Clone)]
pub struct Received {
    /// Records with an intact checksum.
    pub verified: u64,
    /// Records whose checksum did not match.
    pub bad_checksum: u64,
    /// Records seen again after they had arrived.
    pub duplicated: u64,
    /// Records that arrived after a later one.
    pub reordered: u64,
    /// Sequence numbers skipped and not (yet) seen.
    pub missing: BTreeSet<u64>,
    /// The stream lost its framing (bad magic or length).
    pub corrupt: u64,
    /// The next expected sequence number.
    pub expected: u64,
    /// Bytes not yet forming a whole record.
    pending: Vec<u8>,
}

impl Received {
    fn take(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
        let mut at = 0;
        while self.pending.len() - at >= HEADER {
            let h = &self.pending[at..at + HEADER];
            let word = |r: std::ops::Range<usize>| u32::from_le_bytes(h[r].try_into().unwrap());
            let seq = u64::from_le_bytes(h[4..12].try_into().unwrap());
            let (magic, len, sum) = (word(0..4), word(12..16), word(16..20));
            if magic != MAGIC || len > MAX_PAYLOAD {
                // Framing lost: nothing after this can be trusted.
                self.corrupt += 1;
                self.pending.clear();
                return;
            }
            let end = at + HEADER + len as usize;
            if self.pending.len() < end {
                break;
            }
            if checksum(seq, &self.pending[at + HEADER..end]) == sum {
                self.verified += 1;
            } else {
                self.bad_checksum += 1;
            }
            if seq == self.expected {
                self.expected += 1;
            } else if seq > self.expected {
                if seq - self.expected > 1 << 20 {
                    self.corrupt += 1;
                } else {
                    self.missing.extend(self.expected..seq);
                }
                self.expected = seq + 1;
            } else if self.missing.remove(&seq) {
                self.reordered += 1;
            } else {
                self.duplicated += 1;
            }
            at = end;
        }
        self.pending.drain(..at);
    }
}

/// The record streaming [`EngineHandler`].
pub struct RecordHandler<F: Fabric> {
    me: NodeId,
    seed: u64,
    outgoing: Mutex<SendTargets<Records>>,
    packages: Mutex<Rng>,
    incoming: Mutex<HashMap<u16, Received>>,
    pool: OnceLock<Arc<RecvPool<F>>>,
    events: Mutex<Vec<NodeEvent>>,
    generating: AtomicBool,
    /// Records verified, all sources.
    pub verified: AtomicU64,
    /// Packages the engine could not post completely (send queue full).
    pub not_posted_reports: AtomicU64,
}

impl<F: Fabric> RecordHandler<F> {
    pub fn new(me: NodeId, seed: u64) -> Arc<Self> {
        Arc::new(RecordHandler {
            me,
            seed,
            outgoing: Mutex::new(SendTargets::default()),
            packages: Mutex::new(Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1)),
            incoming: Mutex::new(HashMap::new()),
            pool: OnceLock::new(),
            events: Mutex::new(Vec::new()),
            generating: AtomicBool::new(true),
            verified: AtomicU64::new(0),
            not_posted_reports: AtomicU64::new(0),
        })
    }

    pub fn set_pool(&self, pool: Arc<RecvPool<F>>) {
        let _ = self.pool.set(pool);
    }

    /// Starts streaming to `node` through `ring`, the connection's send ring.
    ///
    /// # Safety
    /// As for `StreamHandler::add_target`: `ring` is that ring's `size` bytes,
    /// kept alive by the caller while the engine runs, given once.
    pub unsafe fn add_target(&self, node: NodeId, ring: *mut u8, size: u32) {
        let sizes = Rng((self.seed ^ (u64::from(self.me.0) << 20) ^ u64::from(node.0)).wrapping_mul(0x9E37_79B9) | 1);
        let records = Records { next_seq: 0, pending: Vec::new(), sizes };
        // SAFETY: the caller's contract above is the one `add` asks for.
        unsafe { self.outgoing.lock().unwrap().add(node, ring, size, records) };
    }

    /// Stops making new records; what is written is still sent.
    pub fn stop_generating(&self) {
        self.generating.store(false, Ordering::Release);
    }

    /// Records written per target (the sequence numbers used).
    pub fn sent(&self) -> HashMap<u16, u64> {
        self.outgoing.lock().unwrap().iter().map(|o| (o.node.0, o.state.next_seq)).collect()
    }

    /// True when everything written was sent and confirmed.
    pub fn all_confirmed(&self) -> bool {
        self.outgoing.lock().unwrap().iter().all(|o| o.confirmed == o.written)
    }

    /// What was received, per source.
    pub fn received_from(&self) -> HashMap<u16, Received> {
        self.incoming.lock().unwrap().clone()
    }

    pub fn events(&self) -> Vec<NodeEvent> {
        self.events.lock().unwrap().clone()
    }
}

impl<F: Fabric> EngineHandler for RecordHandler<F> {
    fn next_data_to_send(&self, prev: &PrevWorkResults, completed: &CompletedList) -> NextWorkPackage {
        let mut out = self.outgoing.lock().unwrap();
        if prev.bytes_not_posted > 0 {
            self.not_posted_reports.fetch_add(1, Ordering::Relaxed);
        }
        out.account(prev, completed);
        let generating = self.generating.load(Ordering::Acquire);
        out.next_package(|o| {
            // Write whole records while they fit the free part of the ring.
            if generating {
                loop {
                    let r = &mut o.state;
                    if r.pending.is_empty() {
                        make_record(self.me.0, o.node.0, r.next_seq, &mut r.sizes, &mut r.pending);
                    }
                    // Taken out for the write (which borrows the whole target), then put back.
                    let record = std::mem::take(&mut o.state.pending);
                    let fits = o.write(&record);
                    o.state.pending = record;
                    if !fits {
                        break;
                    }
                    o.state.next_seq += 1;
                    o.state.pending.clear();
                }
            }
            let avail = o.unposted();
            if avail == 0 {
                return None;
            }
            // Random package lengths: records span packages.
            let mut r = self.packages.lock().unwrap();
            let len = if r.below(4) == 0 { avail } else { avail.min(1 + r.below(96 << 10)) };
            Some(o.package(len))
        })
    }

    fn received(&self, ring: &IncomingRing) -> u32 {
        let Some(pool) = self.pool.get() else { return 0 };
        let mut incoming = self.incoming.lock().unwrap();
        let (n, refused) = consume_received(ring, pool, self.me, |source, _fc, data| {
            if data.is_empty() {
                return;
            }
            let r = incoming.entry(source).or_default();
            let before = r.verified;
            r.take(data);
            self.verified.fetch_add(r.verified - before, Ordering::Relaxed);
        });
        assert_eq!(refused, 0, "a receive buffer was given back twice");
        n
    }

    fn node_event(&self, event: NodeEvent) {
        self.events.lock().unwrap().push(event);
    }
}
