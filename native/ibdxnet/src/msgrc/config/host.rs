//! The configuration against the host, checked by the engine's start before
//! any thread starts: the opened device's limits and the CPUs of `pin_threads`.

use super::error::{ConfigError, DeviceLimitError};
use super::EngineConfig;
use crate::fabric::DeviceInfo;
use crate::sys::affinity;

impl EngineConfig {
    /// Checks the configuration against the opened device; the error names
    /// the key and the device limit.
    pub fn check_device_limits(&self, info: &DeviceInfo) -> Result<(), DeviceLimitError> {
        let check = |key: &'static str, limit: &'static str, value: u64, max: u32| {
            if value > u64::from(max) {
                Err(DeviceLimitError::Exceeds { key, value, limit, max: max.into(), device: info.name.clone() })
            } else {
                Ok(())
            }
        };
        check("sq_size", "max_qp_wr", self.sq_size.into(), info.max_qp_wr)?;
        check("srq_size", "max_srq_wr", self.srq_size.into(), info.max_srq_wr)?;
        check("recv_sges_per_wr", "max_srq_sge", self.recv_sges_per_wr.into(), info.max_srq_sge)?;
        // The shared send CQ holds every connection's send queue.
        let needed = u64::from(self.max_connections) * u64::from(self.sq_size) + 64;
        if needed > u64::from(info.max_cqe) {
            return Err(DeviceLimitError::SendCq {
                max_connections: self.max_connections,
                sq_size: self.sq_size,
                needed,
                max_cqe: info.max_cqe,
                device: info.name.clone(),
            });
        }
        let needed = u64::from(self.srq_size) + 64;
        if needed > u64::from(info.max_cqe) {
            return Err(DeviceLimitError::RecvCq {
                srq_size: self.srq_size,
                needed,
                max_cqe: info.max_cqe,
                device: info.name.clone(),
            });
        }
        let bytes = u64::from(self.recv_buffer_count) * u64::from(self.recv_buffer_size);
        if bytes > info.max_mr_size {
            return Err(DeviceLimitError::RecvPool { bytes, max: info.max_mr_size, device: info.name.clone() });
        }
        if u64::from(self.send_ring_size) > info.max_mr_size {
            return Err(DeviceLimitError::SendRing {
                send_ring_size: self.send_ring_size,
                max: info.max_mr_size,
                device: info.name.clone(),
            });
        }
        Ok(())
    }

    /// Checks that every CPU of `pin_threads` is one the calling (starting)
    /// thread may run on: the engine's threads inherit its CPU set, and a
    /// CPU outside it (absent, offline or outside the cpuset) is refused
    /// here rather than failing in the thread.
    pub fn check_pins(&self) -> Result<(), ConfigError> {
        if self.pin_threads.iter().next().is_none() {
            return Ok(());
        }
        let allowed = affinity::allowed_cpus().map_err(ConfigError::Affinity)?;
        for (role, cpu) in self.pin_threads.iter() {
            if !allowed.contains(&cpu) {
                return Err(ConfigError::PinnedCpu {
                    thread: role.name(),
                    cpu,
                    allowed: affinity::list_text(&allowed),
                });
            }
        }
        Ok(())
    }
}
