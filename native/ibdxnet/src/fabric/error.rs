//! Errors of the fabric layer: every failing verb is named with its errno.

use std::fmt;

/// A failed fabric operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FabricError {
    /// A libibverbs call failed.
    Verbs {
        /// The verb, e.g. `ibv_create_qp`.
        call: &'static str,
        /// `errno` (or the returned error number).
        errno: i32,
    },
    /// No RDMA device exists on this host.
    NoDevice,
    /// The requested device does not exist.
    UnknownDevice {
        /// Name asked for.
        name: String,
        /// Names that exist.
        available: Vec<String>,
    },
    /// The port does not exist or is not active.
    BadPort {
        /// Device name.
        device: String,
        /// Port asked for.
        port: u8,
        /// Why it cannot be used.
        reason: String,
    },
    /// A requested size exceeds what the device supports.
    Limit {
        /// The quantity, e.g. `max_send_wr`.
        what: &'static str,
        /// Value asked for.
        requested: u64,
        /// Device maximum.
        max: u64,
    },
    /// An argument is invalid.
    InvalidArgument(String),
    /// A queue pair is not in the state the operation needs.
    BadState(String),
    /// A completion queue overran: completions were lost by the device.
    CqOverrun,
    /// The selected fabric cannot be used here.
    Unavailable(String),
    /// The remote endpoint is on another fabric instance (another sim
    /// network, i.e. another process, or sim against verbs): its queue pair
    /// cannot be reached from here.
    ForeignEndpoint {
        /// Our sim network (0 on verbs).
        ours: u64,
        /// The endpoint's sim network (0 on verbs).
        theirs: u64,
    },
}

impl FabricError {
    /// Builds [`FabricError::Verbs`] from the current `errno`.
    pub fn last_os(call: &'static str) -> FabricError {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        FabricError::Verbs { call, errno }
    }
    /// The errno, for verbs errors.
    pub fn errno(&self) -> Option<i32> {
        match self {
            FabricError::Verbs { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

impl fmt::Display for FabricError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FabricError::Verbs { call, errno } => {
                write!(f, "{call} failed: {} (errno {errno})", std::io::Error::from_raw_os_error(*errno))
            }
            FabricError::NoDevice => f.write_str("no RDMA device found (ibv_get_device_list is empty)"),
            FabricError::UnknownDevice { name, available } => {
                write!(f, "RDMA device '{name}' not found; available: [{}]", available.join(", "))
            }
            FabricError::BadPort { device, port, reason } => {
                write!(f, "port {port} of device {device} cannot be used: {reason}")
            }
            FabricError::Limit { what, requested, max } => {
                write!(f, "{what} = {requested} exceeds the device limit of {max}")
            }
            FabricError::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            FabricError::BadState(m) => write!(f, "bad queue pair state: {m}"),
            FabricError::CqOverrun => f.write_str("completion queue overrun: completions were lost"),
            FabricError::Unavailable(m) => write!(f, "fabric unavailable: {m}"),
            FabricError::ForeignEndpoint { ours, theirs } => {
                write!(f, "the remote endpoint {}", foreign_reason(*ours, *theirs))
            }
        }
    }
}

impl std::error::Error for FabricError {}

/// Why a peer on sim network `theirs` cannot be reached from sim network
/// `ours` (0 = an RDMA device), and what to use instead; completes a sentence
/// whose subject is the peer.
pub fn foreign_reason(ours: u64, theirs: u64) -> String {
    const ONLY: &str = "sim connects nodes of one process only";
    match (ours, theirs) {
        (0, _) => format!(
            "is on the in-process sim fabric (no RDMA device there) and this node on an RDMA device; {ONLY} \
             — use an RDMA device on both nodes, or transport=nio"
        ),
        (_, 0) => format!(
            "is on an RDMA device and this node on the in-process sim fabric; {ONLY} \
             — use an RDMA device here too (fabric=verbs), or transport=nio"
        ),
        _ => format!(
            "is not in this process's sim fabric (its sim network is {theirs:#018x}, ours {ours:#018x}); {ONLY} \
             — use transport=nio, or an RDMA device"
        ),
    }
}

/// A post that failed part-way: the first `posted` requests of the chain were
/// accepted, the one at index `posted` was refused with `error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostError {
    /// Requests accepted before the failing one.
    pub posted: usize,
    /// Why the request at index `posted` was refused.
    pub error: FabricError,
}

impl PostError {
    /// True if the queue was full (`ENOMEM`, as libibverbs reports it).
    pub fn is_queue_full(&self) -> bool {
        self.error.errno() == Some(libc::ENOMEM)
    }
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (after {} requests were posted)", self.error, self.posted)
    }
}

impl std::error::Error for PostError {}
