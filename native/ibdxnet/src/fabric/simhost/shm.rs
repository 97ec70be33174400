//! Shared-memory plumbing: file mappings, futexes across processes, and the
//! doorbell a device's wire thread sleeps on.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::Duration;

/// A shared, read-write mapping of the first `len` bytes of a file.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with other processes; every
// access goes through atomics or raw-pointer copies whose races the ring
// protocol rules out, so moving or sharing the handle between threads is fine.
unsafe impl Send for Mapping {}
// SAFETY: as above; `Mapping` itself has no interior state besides the memory.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file` (which must be at least that long).
    pub fn new(file: &File, len: usize) -> io::Result<Mapping> {
        let size = file.metadata()?.len();
        if size < len as u64 || len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("file of {size} bytes, {len} expected")));
        }
        // SAFETY: a fresh shared mapping of a file we hold open; the kernel
        // picks the address, so nothing of ours is overlapped.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mapping { ptr, len })
    }

    /// Start of the mapping (page aligned).
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// A reference to the `T` at the start of the mapping.
    ///
    /// # Safety
    /// `T` must fit into the mapping, need at most page alignment, and be
    /// valid for any bit pattern another process may write (atomics and
    /// plain integers only).
    pub unsafe fn header<T>(&self) -> &T {
        debug_assert!(std::mem::size_of::<T>() <= self.len);
        // SAFETY: the caller vouches for size, alignment and validity; the
        // mapping lives as long as `self`.
        unsafe { &*self.ptr.as_ptr().cast::<T>() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no reference into it
        // outlives `self` (they borrow from it).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Sleeps while `word` holds `expected`, at most `timeout` (shared futex:
/// works across processes mapping the same file).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `word` is a live, aligned u32; the timespec lives across the call.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, &ts as *const libc::timespec) };
}

/// Wakes every thread sleeping on `word` in any process.
pub(crate) fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE does not touch memory.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}

/// An event count in shared memory: the wire thread of a device sleeps on
/// it, anyone with work for that device rings it. Ringing costs a fence and
/// a load unless the thread sleeps.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    seq: AtomicU32,
    waiters: AtomicU32,
}

impl Doorbell {
    /// Wakes the sleeper, if there is one. Call after publishing the work.
    pub fn ring(&self) {
        // Pairs with the fence in `wait`: either the sleeper sees our work
        // in its last check, or we see it registered.
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            self.seq.fetch_add(1, Ordering::SeqCst);
            futex_wake(&self.seq);
        }
    }

    /// Wakes the sleeper unconditionally (shutdown).
    pub fn force(&self) {
        self.seq.fetch_add(1, Ordering::SeqCst);
        futex_wake(&self.seq);
    }

    /// Sleeps until rung or `timeout`, unless `work` (run after registering
    /// as a sleeper) finds something to do. True if `work` did.
    pub fn wait(&self, timeout: Duration, work: impl FnOnce() -> bool) -> bool {
        let seen = self.seq.load(Ordering::SeqCst);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let busy = work();
        if !busy {
            futex_wait(&self.seq, seen, timeout);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn doorbell_wakes_a_sleeper_and_loses_no_ring() {
        let bell = Arc::new(Doorbell::default());
        let flag = Arc::new(AtomicBool::new(false));
        for _ in 0..200 {
            flag.store(false, Ordering::SeqCst);
            let (b, f) = (bell.clone(), flag.clone());
            let t = std::thread::spawn(move || {
                let t0 = Instant::now();
                while !f.load(Ordering::SeqCst) {
                    b.wait(Duration::from_secs(5), || f.load(Ordering::SeqCst));
                }
                t0.elapsed()
            });
            flag.store(true, Ordering::SeqCst);
            bell.ring();
            assert!(t.join().unwrap() < Duration::from_secs(4), "a ring was lost");
        }
    }
}
