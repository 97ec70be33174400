//! Page-aligned, zero-initialised heap memory for registration.

use crate::fabric::FabricError;

/// Page-aligned heap memory, freed on drop. Untouched pages stay
/// unallocated by the kernel until first written.
pub struct Region {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: the region is plain memory; who reads and writes which part is
// coordinated by its owners (ring positions, buffer ownership).
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Region({:p}, {} bytes)", self.ptr, self.layout.size())
    }
}

impl Region {
    /// Allocates `len` bytes (at least one), aligned to 4096.
    pub fn new(len: usize) -> Result<Region, FabricError> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
            .map_err(|e| FabricError::InvalidArgument(format!("region of {len} bytes: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(FabricError::InvalidArgument(format!("cannot allocate {len} bytes")));
        }
        Ok(Region { ptr, layout })
    }

    /// First byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// True for a one-byte placeholder region.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}
