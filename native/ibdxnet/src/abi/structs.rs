//! The `#[repr(C)]` structures shared with Java (through `Unsafe`) and C
//! (through the generated `include/ibdxnet.h`); their layout table is in
//! [`super::layout`], the constants their fields take in [`super::constants`].
//!
//! Send side, one round trip per send-thread iteration:
//! the engine passes [`PrevWorkResults`] (what happened to the last package)
//! and a [`CompletedWorkList`] (bytes and flow-control data confirmed per
//! node since the last call); the user answers with a [`NextWorkPackage`].
//!
//! Receive side: the receive thread fills the [`IncomingRing`] with
//! [`IncomingEntry`]s and hands the ring to the user, who consumes entries
//! from the front and later returns each entry's buffer.

use super::constants::{LINK_LAYER_ETHERNET, LINK_LAYER_INFINIBAND, LINK_LAYER_SIM, NODE_ID_INVALID};
use crate::fabric::{DeviceInfo, LinkLayer};

/// The next data to send (user → engine). 16 bytes.
///
/// ```text
/// 0 node_id u16  2 fc_data u8  3 flags u8  4 offset u32  8 length u32  12 connection u32
/// ```
/// `offset` is the position in the node's send ring where the data starts
/// (the ring's *front posted* pointer), `length` how many bytes follow
/// (wrapping around the ring's end). `fc_data` is a flow-control count to
/// piggy-back (0–255); with `length == 0` it goes out as a zero-length send.
/// `connection` names the connection whose ring holds the data (its local
/// queue pair number, see `Connection::local_qpn`); if the node's connection
/// was replaced meanwhile, the data is not posted rather than read from the
/// wrong ring. 0 = do not check.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NextWorkPackage {
    /// Target node.
    pub node_id: u16,
    /// Flow-control data to send.
    pub fc_data: u8,
    /// `NWP_VALID` or 0 (see `abi::constants`).
    pub flags: u8,
    /// Start offset in the send ring.
    pub offset: u32,
    /// Bytes to send.
    pub length: u32,
    /// Local QPN of the connection the data was written for (0 = any).
    pub connection: u32,
}

/// What the engine did with the previous package (engine → user). 16 bytes.
///
/// ```text
/// 0 node_id u16  2 fc_posted u8  3 fc_not_posted u8  4 bytes_posted u32  8 bytes_not_posted u32  12 reserved u32
/// ```
/// `node_id` is `NODE_ID_INVALID` when there was no package.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrevWorkResults {
    /// Node of the previous package, or `NODE_ID_INVALID`.
    pub node_id: u16,
    /// Flow-control data posted.
    pub fc_posted: u8,
    /// Flow-control data not posted (send queue full or no connection).
    pub fc_not_posted: u8,
    /// Bytes posted (advance the front-posted pointer by this).
    pub bytes_posted: u32,
    /// Bytes not posted; offer them again.
    pub bytes_not_posted: u32,
    /// Zero.
    pub reserved: u32,
}

impl Default for PrevWorkResults {
    fn default() -> Self {
        PrevWorkResults {
            node_id: NODE_ID_INVALID,
            fc_posted: 0,
            fc_not_posted: 0,
            bytes_posted: 0,
            bytes_not_posted: 0,
            reserved: 0,
        }
    }
}

/// Bytes and flow-control data confirmed sent for one node's current
/// connection. 12 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompletedWork {
    /// Node the data went to.
    pub node_id: u16,
    /// Flow-control data confirmed.
    pub fc_data: u16,
    /// Bytes confirmed (advance the ring's front pointer by this).
    pub bytes: u32,
    /// The connection (local QPN) whose ring the bytes were in: after a
    /// replacement the user must not apply them to the new connection's ring.
    pub connection: u32,
}

/// Header of the completion list (engine → user); `count` entries of
/// [`CompletedWork`] follow it directly, at most `capacity` (= the
/// connection limit), one per node. 24 bytes + entries.
///
/// The hand-over is idempotent: the engine numbers each hand-over (`seq`,
/// also covering the [`PrevWorkResults`] handed with it); a user that
/// acknowledges explicitly zeroes `bytes` and `fc_data` of each entry once
/// applied, writes `seq` into `prev_applied` once it applied the previous
/// package's results and into `acked` at the end. The engine clears both only
/// when `acked == seq`; otherwise it hands the rest (the unapplied entries,
/// merged with newer confirmations) again under the next number.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompletedWorkList {
    /// Valid entries.
    pub count: u32,
    /// Room for entries.
    pub capacity: u32,
    /// Number of this hand-over (engine → user).
    pub seq: u32,
    /// The last hand-over the user applied in full (user → engine).
    pub acked: u32,
    /// The last hand-over whose previous-package results the user applied (user → engine).
    pub prev_applied: u32,
    /// Zero.
    pub reserved: u32,
}

/// One received buffer (engine → user). 24 bytes.
///
/// ```text
/// 0 source_node_id u16  2 fc_data u8  3 reserved u8  4 data_length u32  8 buffer_id u32  12 connection u32  16 data_address u64
/// ```
/// `buffer_id` is `NO_BUFFER` (see `abi::constants`) for an entry that carries only flow-control
/// data; every other buffer must be returned to the engine once processed.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IncomingEntry {
    /// Sender.
    pub source_node_id: u16,
    /// Flow-control data of the message (on its first buffer only).
    pub fc_data: u8,
    /// Zero.
    pub reserved: u8,
    /// Bytes in this buffer.
    pub data_length: u32,
    /// Handle to return the buffer with.
    pub buffer_id: u32,
    /// The connection that delivered it: the local queue pair number (a new
    /// number means a new byte stream from `source_node_id`).
    pub connection: u32,
    /// Address of the first byte.
    pub data_address: u64,
}

/// Header of the incoming ring (engine ↔ user); `size` entries of
/// [`IncomingEntry`] follow it directly. Entries `[front, front + used)`
/// (modulo `size`) are valid. 16 bytes + entries.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IncomingRingHeader {
    /// Valid entries.
    pub used: u32,
    /// Index of the oldest valid entry.
    pub front: u32,
    /// Index where the next entry goes.
    pub back: u32,
    /// Number of entry slots (power of two).
    pub size: u32,
}

/// The word of a sleeping engine thread that its wakers read first
/// (`sys::doorbell`): 1 while the thread sleeps or is about to, 2 while the
/// send thread is awake but found no work. Java reads the send thread's
/// word after publishing data and calls `sendFromCaller` only when it is not
/// 0 (that posts the data on the caller's thread, or wakes the send thread).
/// It is the word of `sys::doorbell::Doorbell` (an `AtomicU32`, which has
/// the layout of a `u32`; asserted below).
#[repr(C)]
#[derive(Debug, Default)]
pub struct SleepWord {
    /// 1: sleeping; 2: awake and idle; 0: awake and busy (or a waker already rang).
    pub sleeping: std::sync::atomic::AtomicU32,
}

/// Device limits and port attributes as Java and C see them.
///
/// ```text
///  0 max_qp_wr   4 max_sge   8 max_srq_wr  12 max_srq_sge
/// 16 max_cqe    20 active_mtu 24 max_inline_data 28 lid(u16) 30 port(u8) 31 link_layer(u8)
/// 32 gid[16]    48 sim_addr(u64)  56 max_mr_size(u64)            size 64
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbdxnetDeviceInfo {
    /// Maximum work requests per queue.
    pub max_qp_wr: u32,
    /// Maximum SGEs per request.
    pub max_sge: u32,
    /// Maximum work requests per SRQ.
    pub max_srq_wr: u32,
    /// Maximum SGEs per SRQ request.
    pub max_srq_sge: u32,
    /// Maximum completion queue entries.
    pub max_cqe: u32,
    /// Active MTU in bytes.
    pub active_mtu: u32,
    /// Largest inline send (0 if unknown).
    pub max_inline_data: u32,
    /// Local identifier.
    pub lid: u16,
    /// Port number.
    pub port: u8,
    /// `LINK_LAYER_INFINIBAND`, `LINK_LAYER_ETHERNET` (RoCE) or `LINK_LAYER_SIM` (see `abi::constants`).
    pub link_layer: u8,
    /// GID used for RoCE.
    pub gid: [u8; 16],
    /// Simulator device address (0 on verbs).
    pub sim_addr: u64,
    /// Maximum bytes of one memory region.
    pub max_mr_size: u64,
}

impl IbdxnetDeviceInfo {
    /// Fills the shared struct from a device description.
    pub fn new(info: &DeviceInfo, max_inline_data: u32) -> Self {
        IbdxnetDeviceInfo {
            max_qp_wr: info.max_qp_wr,
            max_sge: info.max_sge,
            max_srq_wr: info.max_srq_wr,
            max_srq_sge: info.max_srq_sge,
            max_cqe: info.max_cqe,
            active_mtu: info.active_mtu,
            max_inline_data,
            lid: info.lid,
            port: info.port,
            link_layer: match info.link_layer {
                LinkLayer::InfiniBand => LINK_LAYER_INFINIBAND,
                LinkLayer::Ethernet => LINK_LAYER_ETHERNET,
                LinkLayer::Sim => LINK_LAYER_SIM,
            },
            gid: info.gid.0,
            sim_addr: info.sim_addr,
            max_mr_size: info.max_mr_size,
        }
    }
}

// Pinned sizes: Java maps these.
const _: () = assert!(std::mem::size_of::<NextWorkPackage>() == 16);
const _: () = assert!(std::mem::size_of::<PrevWorkResults>() == 16);
const _: () = assert!(std::mem::size_of::<CompletedWork>() == 12);
const _: () = assert!(std::mem::size_of::<CompletedWorkList>() == 24);
const _: () = assert!(std::mem::size_of::<IncomingEntry>() == 24);
const _: () = assert!(std::mem::size_of::<IncomingRingHeader>() == 16);
// The device-info diagram, pinned.
const _: () = assert!(std::mem::size_of::<IbdxnetDeviceInfo>() == 64);
const _: () = assert!(std::mem::offset_of!(IbdxnetDeviceInfo, gid) == 32);
const _: () = assert!(std::mem::offset_of!(IbdxnetDeviceInfo, sim_addr) == 48);
const _: () = assert!(
    std::mem::size_of::<SleepWord>() == std::mem::size_of::<std::sync::atomic::AtomicU32>()
        && std::mem::align_of::<SleepWord>() == std::mem::align_of::<std::sync::atomic::AtomicU32>()
        && std::mem::offset_of!(SleepWord, sleeping) == 0
);
