//! Page-aligned, zero-initialised memory for registration: an anonymous
//! private mapping, so pages are committed only when first written (the
//! allocator's `alloc_zeroed` at page alignment wrote every byte, which made
//! each connection's 4 MiB send ring resident at once: 64 nodes in one
//! process held 4 032 of them).

use crate::fabric::FabricError;

/// Page-aligned memory, unmapped on drop. Untouched pages stay
/// unallocated by the kernel until first written (on `sim`; registering
/// with a real device pins them).
pub struct Region {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the region is plain memory; who reads and writes which part is
// coordinated by its owners (ring positions, buffer ownership).
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Region({:p}, {} bytes)", self.ptr, self.len)
    }
}

impl Region {
    /// Maps `len` bytes (at least one), aligned to the page size, zeroed.
    pub fn new(len: usize) -> Result<Region, FabricError> {
        let map_len = len.max(1);
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing touches no existing memory; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(FabricError::InvalidArgument(format!("cannot map {len} bytes: {e}")));
        }
        Ok(Region { ptr: ptr.cast(), len: map_len })
    }

    /// First byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a one-byte placeholder region.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length, unmapped once.
        if unsafe { libc::munmap(self.ptr.cast(), self.len.max(1)) } != 0 {
            log::error!("unmapping a region of {} bytes failed: {}", self.len, std::io::Error::last_os_error());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Region;

    /// Resident bytes of this process (`/proc/self/statm`, second field, pages).
    fn resident() -> u64 {
        let s = std::fs::read_to_string("/proc/self/statm").unwrap();
        s.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4096
    }

    /// A region costs memory only for the pages written: 256 MiB mapped
    /// raise the resident set by far less; writing one byte per page of the
    /// first 8 MiB commits those pages.
    #[test]
    fn untouched_pages_are_not_resident() {
        let before = resident();
        let r = Region::new(256 << 20).unwrap();
        let mapped = resident();
        for page in 0..(8 << 20) / 4096 {
            // SAFETY: inside the region's 256 MiB, written by this thread only.
            unsafe { r.ptr().add(page * 4096).write_volatile(1) };
        }
        let touched = resident();
        // Other tests run in this process meanwhile: generous slack.
        assert!(mapped.saturating_sub(before) < 64 << 20, "mapping made {} bytes resident", mapped - before);
        assert!(touched >= mapped + (6 << 20), "writing 8 MiB made only {} bytes resident", touched - mapped);
        // SAFETY: as above.
        assert_eq!(unsafe { r.ptr().add(4096 * 3).read_volatile() }, 1);
        // SAFETY: as above.
        assert_eq!(unsafe { r.ptr().add(9 << 20).read_volatile() }, 0, "zeroed");
    }
}
