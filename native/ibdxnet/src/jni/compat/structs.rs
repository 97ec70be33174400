//! Upstream's packed send structs (C++ Ibdxnet `msgrc/SendHandler.h`, read by
//! upstream Java at hard-coded offsets: IBConnectionManager.java) and their
//! translation from and to ours ([`crate::abi`]). The incoming ring needs none:
//! its layout is byte-identical (upstream reads our `buffer_id | connection << 32`
//! as its opaque `IbMemReg*` handle and hands it back to `returnRecvBuffer`).
//!
//! Each struct lives at one address for the engine's lifetime: upstream Java
//! wraps the addresses of the first call and never looks at them again.

use crate::abi::{CompletedWork, NextWorkPackage, PrevWorkResults, NODE_ID_INVALID, NWP_VALID};

/// Upstream's `NextWorkPackage` (user → engine), 11 bytes, packed:
/// `0 posBackRel u32` (start), `4 posFrontRel u32` (end, exclusive; both
/// relative to the ring), `8 flowControlData u8`, `9 nodeId u16` (`0xFFFF` =
/// nothing to send).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpNextWorkPackage {
    /// Where the data starts in the send ring.
    pub pos_back_rel: u32,
    /// Where it ends (exclusive); equal to the start: no data.
    pub pos_front_rel: u32,
    /// Flow-control data to send.
    pub flow_control_data: u8,
    /// Target node, or `0xFFFF`.
    pub node_id: u16,
}

impl UpNextWorkPackage {
    /// Nothing to send (what upstream Java's `reset()` writes).
    pub const NOTHING: UpNextWorkPackage =
        UpNextWorkPackage { pos_back_rel: 0, pos_front_rel: 0, flow_control_data: 0, node_id: NODE_ID_INVALID };

    /// Ours: `length = (front − back) mod ring_size` (the ring size is a power
    /// of two, checked at init), `connection` the connection the user's ring
    /// belongs to (0 = do not check). A position outside the ring (upstream
    /// Java wraps at the same size, so only a bug writes one) gives length 0:
    /// no data is read from outside the ring; flow-control data still goes.
    #[inline]
    pub fn to_ours(self, ring_size: u32, connection: impl FnOnce(u16) -> u32) -> NextWorkPackage {
        let node = self.node_id;
        if node == NODE_ID_INVALID {
            return NextWorkPackage::default();
        }
        let (back, front) = (self.pos_back_rel, self.pos_front_rel);
        let length = if back < ring_size && front < ring_size { front.wrapping_sub(back) & (ring_size - 1) } else { 0 };
        NextWorkPackage {
            node_id: node,
            fc_data: self.flow_control_data,
            flags: NWP_VALID,
            offset: back,
            length,
            connection: connection(node),
        }
    }
}

/// Upstream's `PrevWorkPackageResults` (engine → user), 12 bytes, packed:
/// `0 nodeId u16`, `2 numBytesPosted u32`, `6 numBytesNotPosted u32`,
/// `10 fcDataPosted u8`, `11 fcDataNotPosted u8`.
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpPrevWorkResults {
    /// Node of the previous package, or `0xFFFF`.
    pub node_id: u16,
    /// Bytes posted.
    pub num_bytes_posted: u32,
    /// Bytes not posted (to be offered again).
    pub num_bytes_not_posted: u32,
    /// Flow-control data posted.
    pub fc_data_posted: u8,
    /// Flow-control data not posted.
    pub fc_data_not_posted: u8,
}

impl UpPrevWorkResults {
    /// The same results in upstream's layout.
    #[inline]
    pub fn from_ours(p: &PrevWorkResults) -> Self {
        UpPrevWorkResults {
            node_id: p.node_id,
            num_bytes_posted: p.bytes_posted,
            num_bytes_not_posted: p.bytes_not_posted,
            fc_data_posted: p.fc_posted,
            fc_data_not_posted: p.fc_not_posted,
        }
    }
}

/// Node slots of upstream's arrays (`NODE_ID_MAX_NUM_NODES`, 0xFFFF: every id
/// but the invalid one).
pub const MAX_NODES: usize = 0xFFFF;
/// Offset of `numNodes u16`.
pub const CWL_NUM_NODES: usize = 0;
/// Offset of `numBytesWritten[65535] u32`, indexed by node id.
pub const CWL_BYTES: usize = 2;
/// Offset of `fcDataWritten[65535] u8`, indexed by node id.
pub const CWL_FC: usize = CWL_BYTES + 4 * MAX_NODES;
/// Offset of `nodeIds[numNodes] u16`.
pub const CWL_NODE_IDS: usize = CWL_FC + MAX_NODES;
/// Bytes of the list with room for every node id.
pub const CWL_SIZE: usize = CWL_NODE_IDS + 2 * MAX_NODES;

/// Upstream's `CompletedWorkList` (engine → user), indexed by node id:
/// `0 numNodes u16`, `2 numBytesWritten[65535] u32`, `262142
/// fcDataWritten[65535] u8`, `327677 nodeIds[] u16`. Filled from our list
/// before each call; the touched slots are zeroed after it (upstream's
/// `Reset`), so a call costs in proportion to the nodes listed, not to 64 K.
pub struct UpCompletedList {
    /// `CWL_SIZE` bytes, zeroed at start; never reallocated (the address is stable).
    mem: Box<[u8]>,
    /// Nodes listed by the last [`Self::fill`].
    listed: usize,
}

impl std::fmt::Debug for UpCompletedList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpCompletedList").field("listed", &self.listed).finish()
    }
}

impl Default for UpCompletedList {
    fn default() -> Self {
        Self::new()
    }
}

impl UpCompletedList {
    /// An empty list.
    pub fn new() -> Self {
        UpCompletedList { mem: vec![0u8; CWL_SIZE].into_boxed_slice(), listed: 0 }
    }

    /// Address of the list (for Java).
    pub fn address(&self) -> *const u8 {
        self.mem.as_ptr()
    }

    #[inline]
    fn put_u16(&mut self, at: usize, v: u16) {
        self.mem[at..at + 2].copy_from_slice(&v.to_ne_bytes());
    }

    #[inline]
    fn put_u32(&mut self, at: usize, v: u32) {
        self.mem[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }

    #[inline]
    fn get_u16(&self, at: usize) -> u16 {
        u16::from_ne_bytes([self.mem[at], self.mem[at + 1]])
    }

    /// Lists our completions whose connection `accept(node, connection)`
    /// takes (the one the user writes into; confirmations of an older ring
    /// must not advance the new one). Empty entries are skipped; the
    /// flow-control sum saturates at 255 (upstream's `u8`; Java ignores it).
    #[inline]
    pub fn fill(&mut self, entries: &[CompletedWork], mut accept: impl FnMut(u16, u32) -> bool) {
        debug_assert_eq!(self.listed, 0, "reset after every fill");
        let mut n = 0;
        for e in entries {
            let node = e.node_id as usize;
            if node >= MAX_NODES || (e.bytes == 0 && e.fc_data == 0) || !accept(e.node_id, e.connection) {
                continue;
            }
            self.put_u32(CWL_BYTES + 4 * node, e.bytes);
            self.mem[CWL_FC + node] = e.fc_data.min(255) as u8;
            self.put_u16(CWL_NODE_IDS + 2 * n, e.node_id);
            n += 1;
        }
        self.put_u16(CWL_NUM_NODES, n as u16);
        self.listed = n;
    }

    /// Zeroes what the last [`Self::fill`] wrote (upstream's `Reset`).
    #[inline]
    pub fn reset(&mut self) {
        for i in 0..self.listed {
            let node = self.get_u16(CWL_NODE_IDS + 2 * i) as usize;
            self.put_u32(CWL_BYTES + 4 * node, 0);
            self.mem[CWL_FC + node] = 0;
            self.put_u16(CWL_NODE_IDS + 2 * i, NODE_ID_INVALID);
        }
        self.put_u16(CWL_NUM_NODES, 0);
        self.listed = 0;
    }

    /// Bytes listed for `node` (tests).
    pub fn bytes_of(&self, node: u16) -> u32 {
        let at = CWL_BYTES + 4 * node as usize;
        u32::from_ne_bytes(self.mem[at..at + 4].try_into().expect("4 bytes"))
    }

    /// The listed node ids (tests).
    pub fn nodes(&self) -> Vec<u16> {
        (0..self.get_u16(CWL_NUM_NODES) as usize).map(|i| self.get_u16(CWL_NODE_IDS + 2 * i)).collect()
    }

    /// Whether every byte is zero but the `0xFFFF` ids `reset` leaves (tests).
    pub fn is_clean(&self) -> bool {
        self.mem[..CWL_NODE_IDS].iter().all(|&b| b == 0)
            && self.mem[CWL_NODE_IDS..].chunks(2).all(|c| c == [0, 0] || c == [0xFF, 0xFF])
    }
}

// Upstream's sizes (FACTS.md §2), pinned.
const _: () = assert!(std::mem::size_of::<UpNextWorkPackage>() == 11);
const _: () = assert!(std::mem::size_of::<UpPrevWorkResults>() == 12);
const _: () = assert!(CWL_FC == 262_142 && CWL_NODE_IDS == 327_677);

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;

    #[test]
    fn layouts_are_upstreams() {
        assert_eq!(std::mem::size_of::<UpNextWorkPackage>(), 11);
        assert_eq!(offset_of!(UpNextWorkPackage, pos_back_rel), 0);
        assert_eq!(offset_of!(UpNextWorkPackage, pos_front_rel), 4);
        assert_eq!(offset_of!(UpNextWorkPackage, flow_control_data), 8);
        assert_eq!(offset_of!(UpNextWorkPackage, node_id), 9);
        assert_eq!(std::mem::size_of::<UpPrevWorkResults>(), 12);
        assert_eq!(offset_of!(UpPrevWorkResults, node_id), 0);
        assert_eq!(offset_of!(UpPrevWorkResults, num_bytes_posted), 2);
        assert_eq!(offset_of!(UpPrevWorkResults, num_bytes_not_posted), 6);
        assert_eq!(offset_of!(UpPrevWorkResults, fc_data_posted), 10);
        assert_eq!(offset_of!(UpPrevWorkResults, fc_data_not_posted), 11);
        assert_eq!((CWL_NUM_NODES, CWL_BYTES, CWL_FC, CWL_NODE_IDS), (0, 2, 262_142, 327_677));
    }

    /// The bytes Java writes at its constants' offsets read back as the fields.
    #[test]
    fn next_work_package_bytes() {
        let mut b = [0u8; 11];
        b[0..4].copy_from_slice(&100u32.to_ne_bytes());
        b[4..8].copy_from_slice(&20u32.to_ne_bytes());
        b[8] = 7;
        b[9..11].copy_from_slice(&3u16.to_ne_bytes());
        // SAFETY: 11 initialised bytes; the struct is packed (alignment 1) and any bit pattern is valid.
        let p = unsafe { std::ptr::read_unaligned(b.as_ptr() as *const UpNextWorkPackage) };
        let ours = p.to_ours(128, |n| u32::from(n) + 1000);
        // Wraps: [100, 128) + [0, 20).
        assert_eq!(
            ours,
            NextWorkPackage { node_id: 3, fc_data: 7, flags: NWP_VALID, offset: 100, length: 48, connection: 1003 }
        );
        assert_eq!(UpNextWorkPackage::NOTHING.to_ours(128, |_| 1), NextWorkPackage::default());
        let fc_only = UpNextWorkPackage { pos_back_rel: 5, pos_front_rel: 5, flow_control_data: 1, node_id: 2 };
        assert_eq!(fc_only.to_ours(128, |_| 0).length, 0);
        let outside = UpNextWorkPackage { pos_back_rel: 500, pos_front_rel: 5, flow_control_data: 0, node_id: 2 };
        assert_eq!(outside.to_ours(128, |_| 0).length, 0, "nothing read from outside the ring");
    }

    #[test]
    fn prev_results_bytes() {
        let ours = PrevWorkResults {
            node_id: 9,
            fc_posted: 1,
            fc_not_posted: 2,
            bytes_posted: 0x0102_0304,
            bytes_not_posted: 77,
            reserved: 0,
        };
        let up = UpPrevWorkResults::from_ours(&ours);
        // SAFETY: the struct is 12 plain bytes (packed, no padding).
        let b: [u8; 12] = unsafe { std::mem::transmute(up) };
        assert_eq!(&b[0..2], &9u16.to_ne_bytes());
        assert_eq!(&b[2..6], &0x0102_0304u32.to_ne_bytes());
        assert_eq!(&b[6..10], &77u32.to_ne_bytes());
        assert_eq!((b[10], b[11]), (1, 2));
        let none = UpPrevWorkResults::from_ours(&PrevWorkResults::default());
        assert_eq!({ none.node_id }, NODE_ID_INVALID);
    }

    #[test]
    fn completed_list_fills_by_node_and_resets() {
        let mut l = UpCompletedList::new();
        let e = |node_id, bytes, fc_data, connection| CompletedWork { node_id, fc_data, bytes, connection };
        let entries = [e(7, 100, 1, 70), e(3, 0, 0, 30), e(9, 5, 300, 90), e(4, 8, 0, 41), e(0xFFFF, 1, 0, 1)];
        // Node 4's entry is of a connection the user no longer writes into.
        l.fill(&entries, |node, conn| !(node == 4 && conn == 41));
        assert_eq!(l.nodes(), vec![7, 9]);
        assert_eq!((l.bytes_of(7), l.bytes_of(9), l.bytes_of(4)), (100, 5, 0));
        assert_eq!(l.mem[CWL_FC + 9], 255, "saturated");
        assert_eq!(l.mem[CWL_FC + 7], 1);
        l.reset();
        assert!(l.nodes().is_empty());
        assert!(l.is_clean());
        l.fill(&[e(0xFFFE, 1, 0, 1)], |_, _| true);
        assert_eq!(l.bytes_of(0xFFFE), 1, "the last slot");
        l.reset();
        assert!(l.is_clean());
    }

    /// The translation cost per send-thread iteration (what the compat
    /// handler adds around one `getNextDataToSend`): prev → packed, completions
    /// filled and reset, next → ours. Prints ns per iteration:
    /// `cargo test --release --lib translation_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn translation_cost() {
        use std::hint::black_box;
        use std::time::Instant;
        let prev = PrevWorkResults { node_id: 3, bytes_posted: 4096, ..PrevWorkResults::default() };
        for completions in [0usize, 1, 8] {
            let entries: Vec<CompletedWork> = (0..completions as u16)
                .map(|n| CompletedWork { node_id: n * 7, fc_data: 1, bytes: 4096, connection: 100 + u32::from(n) })
                .collect();
            let mut list = UpCompletedList::new();
            let mut up_prev = Box::new(UpPrevWorkResults::from_ours(&prev));
            let next = UpNextWorkPackage { pos_back_rel: 4000, pos_front_rel: 100, flow_control_data: 1, node_id: 3 };
            let iterations = 2_000_000u32;
            let start = Instant::now();
            for i in 0..iterations {
                *up_prev = UpPrevWorkResults::from_ours(black_box(&prev));
                list.fill(black_box(&entries), |_, c| black_box(c) != 0);
                black_box(&*up_prev);
                black_box(list.address());
                let ours = black_box(next).to_ours(1 << 22, |n| u32::from(n) + i);
                black_box(ours);
                list.reset();
            }
            let ns = start.elapsed().as_nanos() as f64 / f64::from(iterations);
            println!("compat translation, {completions} completion(s) per call: {ns:.1} ns per iteration");
        }
    }
}
