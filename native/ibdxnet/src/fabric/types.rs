//! Plain data types of the fabric layer: scatter/gather entries, work
//! requests, completions, device and queue pair descriptions.

use std::fmt;

/// One scatter/gather entry. Same layout as `struct ibv_sge`, so SGE lists go
/// to libibverbs without conversion (checked at compile time in `verbs`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address of the first byte.
    pub addr: u64,
    /// Number of bytes.
    pub length: u32,
    /// Local key of the memory region holding the bytes.
    pub lkey: u32,
}

/// Flags of a send work request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendFlags(u32);

impl SendFlags {
    /// No flags: unsignalled, data gathered by the device.
    pub const NONE: SendFlags = SendFlags(0);
    /// Generate a completion when the request completes successfully.
    pub const SIGNALED: SendFlags = SendFlags(1);
    /// Copy the data into the work request at post time.
    pub const INLINE: SendFlags = SendFlags(2);

    /// True if every flag in `other` is set.
    pub const fn contains(self, other: SendFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for SendFlags {
    type Output = SendFlags;
    fn bitor(self, rhs: SendFlags) -> SendFlags {
        SendFlags(self.0 | rhs.0)
    }
}

/// One send work request inside a [`SendBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Index of the first SGE in the batch's SGE list.
    pub first_sge: u32,
    /// Number of SGEs (0 = zero-length message).
    pub num_sge: u32,
    /// Immediate data: `Some` posts SEND_WITH_IMM, `None` plain SEND.
    pub imm: Option<u32>,
    /// Signalled / inline.
    pub flags: SendFlags,
}

/// A work request that names a span of its batch's SGE list.
pub trait ChainedWr: Copy {
    /// Index of the first SGE and their number.
    fn sge_span(&self) -> (u32, u32);
}

impl ChainedWr for SendWr {
    fn sge_span(&self) -> (u32, u32) {
        (self.first_sge, self.num_sge)
    }
}

/// One receive work request inside a [`RecvBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Index of the first SGE in the batch's SGE list.
    pub first_sge: u32,
    /// Number of SGEs.
    pub num_sge: u32,
}

impl ChainedWr for RecvWr {
    fn sge_span(&self) -> (u32, u32) {
        (self.first_sge, self.num_sge)
    }
}

/// A chain of work requests with their SGEs in one list, reusable across
/// posts (clearing keeps the allocations): [`SendBatch`] or [`RecvBatch`].
#[derive(Debug, Clone)]
pub struct WrBatch<W> {
    wrs: Vec<W>,
    sges: Vec<Sge>,
}

/// A chain of send work requests.
pub type SendBatch = WrBatch<SendWr>;
/// A chain of receive work requests.
pub type RecvBatch = WrBatch<RecvWr>;

impl<W> Default for WrBatch<W> {
    fn default() -> Self {
        WrBatch { wrs: Vec::new(), sges: Vec::new() }
    }
}

impl<W: ChainedWr> WrBatch<W> {
    /// An empty batch with room for `wrs` requests and `sges` SGEs.
    pub fn with_capacity(wrs: usize, sges: usize) -> Self {
        WrBatch { wrs: Vec::with_capacity(wrs), sges: Vec::with_capacity(sges) }
    }
    /// Appends the request `make` builds from the span its `sges` get;
    /// returns its index in the chain.
    fn push_with(&mut self, sges: &[Sge], make: impl FnOnce(u32, u32) -> W) -> usize {
        let first_sge = self.sges.len() as u32;
        self.sges.extend_from_slice(sges);
        self.wrs.push(make(first_sge, sges.len() as u32));
        self.wrs.len() - 1
    }
    /// Removes all requests.
    pub fn clear(&mut self) {
        self.wrs.clear();
        self.sges.clear();
    }
    /// Number of requests.
    pub fn len(&self) -> usize {
        self.wrs.len()
    }
    /// True if there are no requests.
    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }
    /// The requests in chain order.
    pub fn wrs(&self) -> &[W] {
        &self.wrs
    }
    /// The SGEs of request `wr`.
    pub fn sges_of(&self, wr: &W) -> &[Sge] {
        let (first, n) = wr.sge_span();
        &self.sges[first as usize..(first + n) as usize]
    }
    /// Total bytes of request `wr`.
    pub fn byte_len(&self, wr: &W) -> u64 {
        self.sges_of(wr).iter().map(|s| u64::from(s.length)).sum()
    }
}

impl WrBatch<SendWr> {
    /// Appends a send request; returns its index in the chain.
    pub fn push(&mut self, wr_id: u64, sges: &[Sge], imm: Option<u32>, flags: SendFlags) -> usize {
        self.push_with(sges, |first_sge, num_sge| SendWr { wr_id, first_sge, num_sge, imm, flags })
    }
}

impl WrBatch<RecvWr> {
    /// Appends a receive request; returns its index in the chain.
    pub fn push(&mut self, wr_id: u64, sges: &[Sge]) -> usize {
        self.push_with(sges, |first_sge, num_sge| RecvWr { wr_id, first_sge, num_sge })
    }
}

/// Completion status; the numeric values are libibverbs' `ibv_wc_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WcStatus {
    /// The request completed.
    #[default]
    Success,
    /// Local length error: e.g. a receive request too small for the message.
    LocLenErr,
    /// Local QP operation error.
    LocQpOpErr,
    /// Local protection error: an SGE outside registered memory.
    LocProtErr,
    /// Flushed because the queue pair is in the error state.
    WrFlushErr,
    /// The remote side rejected the request (e.g. its receive was too small).
    RemInvReqErr,
    /// Remote access error.
    RemAccessErr,
    /// Remote operation error.
    RemOpErr,
    /// Transport retries exceeded: the peer does not answer.
    RetryExcErr,
    /// Receiver-not-ready retries exceeded.
    RnrRetryExcErr,
    /// Any other status, by its libibverbs number.
    Other(u32),
}

impl WcStatus {
    /// Maps libibverbs' status number.
    pub fn from_raw(raw: u32) -> WcStatus {
        match raw {
            0 => WcStatus::Success,
            1 => WcStatus::LocLenErr,
            2 => WcStatus::LocQpOpErr,
            4 => WcStatus::LocProtErr,
            5 => WcStatus::WrFlushErr,
            9 => WcStatus::RemInvReqErr,
            10 => WcStatus::RemAccessErr,
            11 => WcStatus::RemOpErr,
            12 => WcStatus::RetryExcErr,
            13 => WcStatus::RnrRetryExcErr,
            n => WcStatus::Other(n),
        }
    }
    /// libibverbs' status number.
    pub fn to_raw(self) -> u32 {
        match self {
            WcStatus::Success => 0,
            WcStatus::LocLenErr => 1,
            WcStatus::LocQpOpErr => 2,
            WcStatus::LocProtErr => 4,
            WcStatus::WrFlushErr => 5,
            WcStatus::RemInvReqErr => 9,
            WcStatus::RemAccessErr => 10,
            WcStatus::RemOpErr => 11,
            WcStatus::RetryExcErr => 12,
            WcStatus::RnrRetryExcErr => 13,
            WcStatus::Other(n) => n,
        }
    }
    /// The libibverbs name, e.g. `IBV_WC_RETRY_EXC_ERR`.
    pub fn name(self) -> &'static str {
        match self {
            WcStatus::Success => "IBV_WC_SUCCESS",
            WcStatus::LocLenErr => "IBV_WC_LOC_LEN_ERR",
            WcStatus::LocQpOpErr => "IBV_WC_LOC_QP_OP_ERR",
            WcStatus::LocProtErr => "IBV_WC_LOC_PROT_ERR",
            WcStatus::WrFlushErr => "IBV_WC_WR_FLUSH_ERR",
            WcStatus::RemInvReqErr => "IBV_WC_REM_INV_REQ_ERR",
            WcStatus::RemAccessErr => "IBV_WC_REM_ACCESS_ERR",
            WcStatus::RemOpErr => "IBV_WC_REM_OP_ERR",
            WcStatus::RetryExcErr => "IBV_WC_RETRY_EXC_ERR",
            WcStatus::RnrRetryExcErr => "IBV_WC_RNR_RETRY_EXC_ERR",
            WcStatus::Other(_) => "IBV_WC_(other)",
        }
    }
    /// True for [`WcStatus::Success`].
    pub fn is_success(self) -> bool {
        self == WcStatus::Success
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WcStatus::Other(n) => write!(f, "ibv_wc_status {n}"),
            s => f.write_str(s.name()),
        }
    }
}

/// What kind of request completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WcOpcode {
    /// A send request (with or without immediate data).
    #[default]
    Send,
    /// A receive request.
    Recv,
    /// Anything else (not used by this library).
    Other(u32),
}

/// One work completion, polled from a [`CompletionQueue`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The `wr_id` of the request.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// Send or receive. Only valid for successful completions (as in verbs).
    pub opcode: WcOpcode,
    /// Bytes received (receives only).
    pub byte_len: u32,
    /// Immediate data, if the message carried some (receives only).
    pub imm_data: Option<u32>,
    /// Local queue pair number the request belonged to.
    pub qp_num: u32,
    /// Vendor specific error syndrome.
    pub vendor_err: u32,
}

/// Link layer of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand: addressed by LID.
    InfiniBand,
    /// RoCE: addressed by GID (`is_global`).
    Ethernet,
    /// The in-process simulator.
    Sim,
}

/// A 128-bit global identifier.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// True if all bytes are zero (no GID).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// Limits and port attributes of an opened device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name (`mlx5_0`, `rxe0`, `sim3`).
    pub name: String,
    /// Port number.
    pub port: u8,
    /// Link layer of the port.
    pub link_layer: LinkLayer,
    /// Local identifier (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// GID used for RoCE (zero on InfiniBand unless a GID index was set).
    pub gid: Gid,
    /// GID table index of `gid`, if one is used.
    pub gid_index: Option<u8>,
    /// Active MTU in bytes.
    pub active_mtu: u32,
    /// Maximum work requests per queue.
    pub max_qp_wr: u32,
    /// Maximum SGEs per send/receive request.
    pub max_sge: u32,
    /// Maximum work requests per SRQ.
    pub max_srq_wr: u32,
    /// Maximum SGEs per SRQ request.
    pub max_srq_sge: u32,
    /// Maximum completion queue entries.
    pub max_cqe: u32,
    /// Maximum bytes of one memory region.
    pub max_mr_size: u64,
    /// Simulator address of this device (0 on verbs).
    pub sim_addr: u64,
    /// The sim network this device is on (random per network, never 0; 0 on
    /// verbs, where LID and GID address the port). Sim addresses and QPNs are
    /// only meaningful inside one network, i.e. one process.
    pub sim_network: u64,
}

/// Send queue capabilities of a queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Depth of the send queue.
    pub max_send_wr: u32,
    /// SGEs per send request.
    pub max_send_sge: u32,
    /// Bytes that may be sent inline (0 = no inline).
    pub max_inline_data: u32,
}

/// Queue pair states (the subset the engine uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// Just created.
    Reset,
    /// Initialised, not yet connected.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send: connected.
    Rts,
    /// Failed or flushed.
    Error,
    /// Any other state.
    Other,
}

/// Everything the remote side needs to connect to a queue pair; exchanged
/// out of band (UDP in the connection manager).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpEndpoint {
    /// Queue pair number.
    pub qpn: u32,
    /// Initial packet sequence number (24 bits).
    pub psn: u32,
    /// LID (InfiniBand).
    pub lid: u16,
    /// GID (RoCE; zero on InfiniBand).
    pub gid: Gid,
    /// Path MTU in bytes the side can use.
    pub mtu: u32,
    /// Simulator address of the device (0 on verbs).
    pub sim_addr: u64,
    /// The sim network of the device (0 on verbs): an endpoint of another
    /// network names a queue pair that cannot be reached.
    pub sim_network: u64,
}
