//! What every user of the engine's send rings keeps (paper §7): per target
//! the ring and three stream positions — written, posted, confirmed —, the
//! engine's reports applied to them, the next package chosen round-robin,
//! and received buffers handed back to the pool. The loopback benchmark
//! ([`crate::loopback`]) and the tests' record streams are built on it; they
//! differ only in what they write and what they check.

use crate::con::NodeId;
use crate::fabric::Fabric;
use crate::msgrc::recv_pool::RecvPool;
use crate::msgrc::{CompletedList, IncomingRing, NextWorkPackage, PrevWorkResults, NO_BUFFER, NWP_VALID};

/// One outgoing stream: positions are absolute byte counts.
#[derive(Debug)]
pub struct Target<T> {
    /// The node the stream goes to.
    pub node: NodeId,
    ring: *mut u8,
    size: u32,
    /// Bytes written into the ring (the ring's back).
    pub written: u64,
    /// Bytes the engine posted.
    pub posted: u64,
    /// Bytes confirmed (the ring's front).
    pub confirmed: u64,
    /// The user's own state for this stream.
    pub state: T,
}

// SAFETY: `ring` points into a connection's send ring that the user keeps
// alive (it holds the connection, see `SendTargets::add`); only the send
// thread, which owns the targets, touches it.
unsafe impl<T: Send> Send for Target<T> {}

impl<T> Target<T> {
    /// The end of the ring's free part: `[written, free_end())` may be written.
    pub fn free_end(&self) -> u64 {
        self.confirmed + u64::from(self.size)
    }

    fn index(&self, pos: u64) -> usize {
        (pos % u64::from(self.size)) as usize
    }

    /// Writes `data` at `written`, wrapping around, and advances `written`;
    /// false, writing nothing, if it does not fit the free part.
    pub fn write(&mut self, data: &[u8]) -> bool {
        if data.len() as u64 > self.free_end() - self.written {
            return false;
        }
        let at = self.index(self.written);
        let first = data.len().min(self.size as usize - at);
        // SAFETY: `ring` holds `size` bytes (`SendTargets::add`); the first part
        // ends at most at `size`, the rest (< size, as data fits the free part,
        // at most `size` bytes) starts at 0; both lie in the free part, which no
        // posted work request covers.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ring.add(at), first);
            std::ptr::copy_nonoverlapping(data.as_ptr().add(first), self.ring, data.len() - first);
        }
        self.written += data.len() as u64;
        true
    }

    /// Writes `byte(pos)` at every stream position from `written` up to
    /// `end` (at most the end of the free part).
    pub fn fill_to(&mut self, end: u64, mut byte: impl FnMut(u64) -> u8) {
        let end = end.min(self.free_end());
        while self.written < end {
            let at = self.index(self.written);
            // SAFETY: `at` < size; the position lies in the free part (see `write`).
            unsafe { *self.ring.add(at) = byte(self.written) };
            self.written += 1;
        }
    }

    /// Counts the bytes up to `end` (at most the end of the free part) as
    /// written without touching them (benchmarks send whatever is there).
    pub fn skip_to(&mut self, end: u64) {
        self.written = self.written.max(end.min(self.free_end()));
    }

    /// Bytes written and not yet posted.
    pub fn unposted(&self) -> u64 {
        self.written - self.posted
    }

    /// The package of the next `len` unposted bytes.
    pub fn package(&self, len: u64) -> NextWorkPackage {
        NextWorkPackage {
            node_id: self.node.0,
            fc_data: 0,
            flags: NWP_VALID,
            offset: self.index(self.posted) as u32,
            length: len as u32,
            connection: 0,
        }
    }
}

/// The outgoing streams of one engine user, served round-robin.
#[derive(Debug)]
pub struct SendTargets<T> {
    targets: Vec<Target<T>>,
    next: usize,
}

impl<T> Default for SendTargets<T> {
    fn default() -> Self {
        SendTargets { targets: Vec::new(), next: 0 }
    }
}

impl<T> SendTargets<T> {
    /// Starts a stream to `node` through its connection's send ring.
    ///
    /// # Safety
    /// `ring` points to the `size` bytes of that ring, which the caller keeps
    /// alive (by holding the connection) while the stream exists, and only
    /// this stream writes into it.
    pub unsafe fn add(&mut self, node: NodeId, ring: *mut u8, size: u32, state: T) {
        self.targets.push(Target { node, ring, size, written: 0, posted: 0, confirmed: 0, state });
    }

    /// Applies the engine's report on the previous package and the bytes it
    /// confirmed; returns the bytes confirmed now.
    pub fn account(&mut self, prev: &PrevWorkResults, completed: &CompletedList) -> u64 {
        if let Some(t) = self.get_mut(prev.node_id) {
            t.posted += u64::from(prev.bytes_posted);
        }
        let mut confirmed = 0;
        for c in completed.entries() {
            if let Some(t) = self.get_mut(c.node_id) {
                t.confirmed += u64::from(c.bytes);
                confirmed += u64::from(c.bytes);
            }
        }
        confirmed
    }

    /// The stream to `node`, if there is one.
    pub fn get_mut(&mut self, node: u16) -> Option<&mut Target<T>> {
        if node == NodeId::INVALID.0 {
            return None;
        }
        self.targets.iter_mut().find(|t| t.node.0 == node)
    }

    /// All streams.
    pub fn iter(&self) -> impl Iterator<Item = &Target<T>> {
        self.targets.iter()
    }

    /// True if there is no stream.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// The first package `offer` makes, asking each stream in turn from the
    /// one after the previous call's first (no stream starves); the empty
    /// package if none has one.
    pub fn next_package(
        &mut self,
        mut offer: impl FnMut(&mut Target<T>) -> Option<NextWorkPackage>,
    ) -> NextWorkPackage {
        let n = self.targets.len();
        if n == 0 {
            return NextWorkPackage::default();
        }
        let start = self.next % n;
        self.next = start + 1;
        (0..n).find_map(|k| offer(&mut self.targets[(start + k) % n])).unwrap_or_default()
    }
}

/// Hands every entry of `ring` to `take(source, fc_data, data)` (no data for
/// an entry without a buffer) and gives its buffer back to `pool`. Returns
/// the entries consumed and the buffers the pool refused (each logged).
pub fn consume_received<F: Fabric>(
    ring: &IncomingRing,
    pool: &RecvPool<F>,
    me: NodeId,
    mut take: impl FnMut(u16, u8, &[u8]),
) -> (u32, u32) {
    let n = ring.used();
    let mut refused = 0;
    for e in (0..n).filter_map(|i| ring.get(i)) {
        if e.buffer_id == NO_BUFFER {
            take(e.source_node_id, e.fc_data, &[]);
            continue;
        }
        // SAFETY: the entry's buffer holds `data_length` received bytes and is
        // ours until it is given back below.
        let data = unsafe { std::slice::from_raw_parts(e.data_address as *const u8, e.data_length as usize) };
        take(e.source_node_id, e.fc_data, data);
        if let Err(err) = pool.give_back(e.buffer_id) {
            log::error!("node {me}: {err}");
            refused += 1;
        }
    }
    (n, refused)
}
