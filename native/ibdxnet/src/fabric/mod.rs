//! The fabric layer: the small set of RDMA resources the engine needs, behind
//! one trait with two implementations.
//!
//! * [`verbs::VerbsFabric`] drives real hardware (InfiniBand or RoCE, incl.
//!   the kernel's Soft-RoCE) through libibverbs.
//! * [`sim::SimFabric`] is an in-process fabric with the same reliable-connected
//!   semantics, failure modes included, for tests, demos and measuring the
//!   software pipeline without hardware.
//! * [`simhost::SimHostFabric`] is the same simulator spanning the processes
//!   of one host: data moves through shared-memory rings.
//!
//! The engine is generic over [`Fabric`] (monomorphised; no dynamic dispatch in
//! the hot loops). One `Fabric` value is one opened device port plus one
//! protection domain; every resource created from it keeps it alive, so drop
//! order never matters to callers.
//!
//! # Safety model
//! Posting work hands raw memory to the "hardware". `post_send` and
//! `post_recv` are therefore `unsafe`: every SGE must point into memory that
//! stays valid (and, for receives, unaliased) until the work request's
//! completion has been polled or its queue pair / SRQ has been destroyed.

mod config;
mod error;
mod types;

pub mod sim;
mod simcq;
pub mod simhost;
mod simparts;
pub mod verbs;

pub use config::{FabricConfig, FabricKind, FabricKindError, SimHostOptions, SimOptions, ENV_FABRIC};
pub use error::{foreign_reason, FabricError, PostError};
pub use types::*;

/// An opened RDMA device port with its protection domain.
pub trait Fabric: Send + Sync + Sized + std::fmt::Debug + 'static {
    /// Registered memory.
    type Mr: MemoryRegion;
    /// Completion queue.
    type Cq: CompletionQueue;
    /// Shared receive queue.
    type Srq: SharedReceiveQueue;
    /// Reliable-connected queue pair.
    type Qp: QueuePair;

    /// Which implementation this is.
    const KIND: FabricKind;

    /// Opens the device and port named by `cfg` and allocates a protection domain.
    fn open(cfg: &FabricConfig) -> Result<Self, FabricError>;

    /// Device limits and port attributes, read once at open.
    fn info(&self) -> &DeviceInfo;

    /// The largest `max_inline_data` a queue pair of this device accepts
    /// (probed once on verbs; 0 if inline sends are not supported).
    fn max_inline_data(&self) -> u32;

    /// Registers `len` bytes at `addr` for local access by the device.
    ///
    /// # Safety
    /// The memory must stay valid for as long as the returned region (or any
    /// work request referring to it) is alive. The fabric writes received data
    /// into it from other threads, so the caller must not hold Rust references
    /// to bytes that posted receive requests cover.
    unsafe fn register(&self, addr: *mut u8, len: usize) -> Result<Self::Mr, FabricError>;

    /// Creates a completion queue with room for at least `cqe` completions.
    fn create_cq(&self, cqe: u32) -> Result<Self::Cq, FabricError>;

    /// Creates a shared receive queue of `max_wr` requests with up to
    /// `max_sge` scatter entries each.
    fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<Self::Srq, FabricError>;

    /// Creates an RC queue pair in state RESET whose receives come from `srq`.
    fn create_qp(
        &self,
        send_cq: &Self::Cq,
        recv_cq: &Self::Cq,
        srq: &Self::Srq,
        caps: QpCaps,
    ) -> Result<Self::Qp, FabricError>;
}

/// Memory registered with a fabric.
pub trait MemoryRegion: Send + Sync + std::fmt::Debug {
    /// Start of the region.
    fn addr(&self) -> *mut u8;
    /// Length of the region in bytes.
    fn len(&self) -> usize;
    /// Local key to put into SGEs.
    fn lkey(&self) -> u32;
    /// True for a zero-length region.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// An SGE covering `len` bytes at `offset` in this region.
    ///
    /// Panics if the range lies outside the region (a programming error in
    /// the caller; SGEs built by hand are checked by the fabric instead).
    fn sge(&self, offset: usize, len: u32) -> Sge {
        assert!(
            offset.checked_add(len as usize).is_some_and(|end| end <= self.len()),
            "sge [{offset}, +{len}) outside region of {} bytes",
            self.len()
        );
        Sge { addr: self.addr() as u64 + offset as u64, length: len, lkey: self.lkey() }
    }
}

/// A completion queue shared by any number of queue pairs.
pub trait CompletionQueue: Send + Sync + std::fmt::Debug {
    /// Number of completions the queue holds before it overruns.
    fn capacity(&self) -> u32;
    /// Moves up to `out.len()` completions into `out`, oldest first, and
    /// returns how many. Never blocks. An overrun queue reports
    /// [`FabricError::CqOverrun`] instead of silently losing completions.
    fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize, FabricError>;
    /// Asks to be woken at the next completion: after this call the first
    /// completion added makes [`wake_fd`](Self::wake_fd) readable. One that
    /// came before is not signalled, so poll once more after arming. False
    /// when the queue cannot promise a wake-up now (sim: timed deliveries are
    /// pending and its timer thread is not running, so only polling moves
    /// them on): keep polling instead of sleeping.
    fn arm(&self) -> Result<bool, FabricError>;
    /// The descriptor an armed queue makes readable (verbs: its completion
    /// channel); readable until [`clear_wake`](Self::clear_wake).
    fn wake_fd(&self) -> std::os::fd::RawFd;
    /// Consumes the wake-ups delivered so far (call after `wake_fd` was
    /// readable, before arming again).
    fn clear_wake(&self) -> Result<(), FabricError>;
    /// Takes back an `arm` no completion has answered yet, where the queue
    /// can (sim, simhost: the next completion then costs its poster no
    /// signal); verbs cannot (a request for notification stays until a
    /// completion answers it), so there it does nothing.
    fn disarm(&self) {}
}

/// A shared receive queue feeding the receive side of many queue pairs.
pub trait SharedReceiveQueue: Send + Sync + std::fmt::Debug {
    /// Maximum number of outstanding receive requests.
    fn max_wr(&self) -> u32;
    /// Maximum scatter entries per receive request.
    fn max_sge(&self) -> u32;
    /// Posts the receive requests of `batch` as one chain. On failure the
    /// error tells how many requests, from the front, were posted.
    ///
    /// # Safety
    /// Every SGE must lie in registered memory that stays valid and is not
    /// read or written by anyone else until its completion has been polled or
    /// the SRQ has been destroyed.
    unsafe fn post_recv(&self, batch: &RecvBatch) -> Result<(), PostError>;
}

/// A reliable-connected queue pair.
pub trait QueuePair: Send + Sync + std::fmt::Debug {
    /// The local queue pair number.
    fn qp_num(&self) -> u32;
    /// What the remote side needs to connect to this queue pair.
    fn endpoint(&self) -> QpEndpoint;
    /// Capabilities granted at creation (may exceed what was asked for).
    fn caps(&self) -> QpCaps;
    /// Current state as the fabric sees it.
    fn state(&self) -> QpState;
    /// Moves RESET → INIT → RTR → RTS, connected to `remote`.
    fn connect(&self, remote: &QpEndpoint) -> Result<(), FabricError>;
    /// Moves the queue pair to ERROR: outstanding requests complete with
    /// flush errors, new ones are flushed immediately. Refused (`EINVAL`)
    /// in RESET, which has no transition to ERROR.
    fn set_error(&self) -> Result<(), FabricError>;
    /// Posts the send requests of `batch` as one chain. On failure the error
    /// tells how many requests, from the front, were posted.
    ///
    /// # Safety
    /// Every non-inline SGE must point into registered memory that stays
    /// valid and unmodified until the request's completion (or a later
    /// signalled one on this queue pair) has been polled.
    unsafe fn post_send(&self, batch: &SendBatch) -> Result<(), PostError>;
}
