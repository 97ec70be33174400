//! Fabric selection and the options of each fabric.

use std::path::PathBuf;
use std::sync::Arc;

use super::sim::SimNetwork;

/// Environment variable overriding the configured fabric: `verbs`, `sim`,
/// `simhost` or `auto`.
pub const ENV_FABRIC: &str = "IBDXNET_FABRIC";

/// Why a fabric's name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FabricKindError {
    /// Not `auto`, `verbs`, `sim` or `simhost` (the name as compared:
    /// trimmed, lower case).
    #[error("unknown fabric '{0}' (expected auto, verbs, sim or simhost)")]
    Unknown(String),
    /// [`ENV_FABRIC`] names no fabric (its value as compared).
    #[error("{}: unknown fabric '{0}' (expected auto, verbs, sim or simhost)", ENV_FABRIC)]
    Environment(String),
}

/// Which fabric implementation to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FabricKind {
    /// Verbs if an RDMA device is present, else sim.
    #[default]
    Auto,
    /// Real libibverbs.
    Verbs,
    /// The in-process simulator.
    Sim,
    /// The simulator spanning the processes of one host (shared memory).
    SimHost,
}

impl FabricKind {
    /// Parses `auto`, `verbs`, `sim` or `simhost` (case-insensitive).
    pub fn parse(s: &str) -> Result<FabricKind, FabricKindError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(FabricKind::Auto),
            "verbs" | "ib" | "rdma" => Ok(FabricKind::Verbs),
            "sim" => Ok(FabricKind::Sim),
            "simhost" => Ok(FabricKind::SimHost),
            other => Err(FabricKindError::Unknown(other.to_string())),
        }
    }

    /// The name as accepted by [`FabricKind::parse`].
    pub fn name(self) -> &'static str {
        match self {
            FabricKind::Auto => "auto",
            FabricKind::Verbs => "verbs",
            FabricKind::Sim => "sim",
            FabricKind::SimHost => "simhost",
        }
    }

    /// Resolves the kind to use: the environment variable `IBDXNET_FABRIC`
    /// wins over `self`; `Auto` becomes `Verbs` when an RDMA device exists.
    pub fn resolve(self) -> Result<FabricKind, FabricKindError> {
        let kind = match std::env::var(ENV_FABRIC) {
            Ok(v) if !v.trim().is_empty() => FabricKind::parse(&v).map_err(|e| match e {
                FabricKindError::Unknown(name) | FabricKindError::Environment(name) => {
                    FabricKindError::Environment(name)
                }
            })?,
            _ => self,
        };
        Ok(match kind {
            FabricKind::Auto if super::verbs::device_names().map(|d| !d.is_empty()).unwrap_or(false) => {
                FabricKind::Verbs
            }
            FabricKind::Auto => FabricKind::Sim,
            k => k,
        })
    }
}

/// Options of the simulated fabric.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// The network the device joins; `None` = the process-wide default network.
    pub network: Option<Arc<SimNetwork>>,
    /// Path MTU the simulated port reports.
    pub mtu: u32,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions { network: None, mtu: 4096 }
    }
}

/// Options of the host-wide simulated fabric (`simhost`).
#[derive(Debug, Clone, Default)]
pub struct SimHostOptions {
    /// The directory devices publish themselves in; `None` =
    /// `$IBDXNET_SIMHOST_DIR`, else `/dev/shm/ibdxnet-simhost-<uid>`, else
    /// `$XDG_RUNTIME_DIR/ibdxnet-simhost`. Processes using the same directory
    /// reach each other.
    pub dir: Option<PathBuf>,
    /// Bytes of each direction's ring of a connection (a power of two);
    /// 0 = `$IBDXNET_SIMHOST_RING` or 1 MiB.
    pub ring_bytes: u32,
}

/// RC transport timeout exponent of `qp_ack_timeout`'s default: 4.096 µs ×
/// 2^16 ≈ 268 ms per try. At 14 (67 ms, upstream Ibdxnet's value) 5 % loss
/// between two Soft-RoCE VMs on a loaded host exhausted the retries in 3 of
/// 7 runs (acknowledgements late, not lost); at 16 in none of 5
/// (bench/results/2026-11-28-cluster-ack-timeout.txt).
pub const DEFAULT_ACK_TIMEOUT: u8 = 16;
/// Retries of `qp_retry_count`'s default: 1 + 6 tries, so a dead peer is
/// reported (retry exceeded) after about 1.9 s. (Not 7: Soft-RoCE treats a
/// retry count of 7 as "retry forever".)
pub const DEFAULT_RETRY_COUNT: u8 = 6;

/// Which device and port to open.
#[derive(Debug, Clone)]
pub struct FabricConfig {
    /// Device name; `None` = the first device.
    pub device: Option<String>,
    /// Port number; 0 = the default, port 1.
    pub port: u8,
    /// GID index for RoCE; `None` = the RoCE v2 IPv4-mapped entry if there is
    /// one, else the first RoCE v2 entry, else index 0.
    pub gid_index: Option<u8>,
    /// Simulator options (ignored by verbs; `simhost` uses `mtu`).
    pub sim: SimOptions,
    /// Options of the host-wide simulator (ignored by the others).
    pub simhost: SimHostOptions,
    /// Verbs RC queue pairs: the local ACK timeout exponent (4.096 µs ×
    /// 2^value per try; 0 waits forever).
    pub ack_timeout: u8,
    /// Verbs RC queue pairs: retries after an ACK timeout or a sequence
    /// error before the send completes with retry-exceeded (0–7).
    pub retry_count: u8,
}

impl Default for FabricConfig {
    fn default() -> Self {
        FabricConfig {
            device: None,
            port: 0,
            gid_index: None,
            sim: SimOptions::default(),
            simhost: SimHostOptions::default(),
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            retry_count: DEFAULT_RETRY_COUNT,
        }
    }
}

impl FabricConfig {
    /// The port to open (1 unless set).
    pub fn port_or_default(&self) -> u8 {
        if self.port == 0 {
            1
        } else {
            self.port
        }
    }
}
