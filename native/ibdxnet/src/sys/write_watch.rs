//! A doorbell rung by a write to memory: for a user that writes into the send
//! rings but never calls the library when it does (upstream DXNet's Java).
//!
//! The rings are registered with a `userfaultfd` in write-protect mode.
//! Before the send thread sleeps it [`arm`](WriteWatch::arm)s them: their
//! pages become write-protected. The first write into an armed ring faults;
//! the kernel holds the writing thread and queues the fault, and the watch's
//! own thread (native only, never attached to a JVM: it must not wait for a
//! safepoint while a Java thread is held) lifts the protection of that ring,
//! which lets the writer go on, and rings the doorbell. So an idle send thread
//! costs nothing and wakes on the first byte written.
//!
//! A write that completed before `arm` is not seen: the caller looks for work
//! after arming and sleeps only a bounded time (`SleepBound`). Where the
//! kernel refuses userfaultfd (old kernels, seccomp), [`WriteWatch::new`]
//! fails and the caller polls instead.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::doorbell::Doorbell;
use crate::util::lock;

// <linux/userfaultfd.h>
const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
const UFFDIO_REGISTER: libc::c_ulong = 0xC020_AA00;
const UFFDIO_UNREGISTER: libc::c_ulong = 0x8010_AA01;
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xC018_AA06;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;

#[repr(C)]
#[derive(Clone, Copy)]
struct Range {
    start: u64,
    len: u64,
}
#[repr(C)]
struct Api {
    api: u64,
    features: u64,
    ioctls: u64,
}
#[repr(C)]
struct Register {
    range: Range,
    mode: u64,
    ioctls: u64,
}
#[repr(C)]
struct WriteProtect {
    range: Range,
    mode: u64,
}
/// `struct uffd_msg` (32 bytes); only the page-fault member is read.
#[repr(C)]
#[derive(Clone, Copy)]
struct Msg {
    event: u8,
    _reserved: [u8; 7],
    flags: u64,
    address: u64,
    _feat: u64,
}

/// One watched range and whether it is armed now.
struct Watched {
    len: u64,
    armed: AtomicBool,
}

struct Shared {
    uffd: OwnedFd,
    ranges: Mutex<HashMap<u64, Arc<Watched>>>,
    door: Arc<Doorbell>,
    stop: AtomicBool,
    /// Faults taken (each one a held writer and a rung doorbell).
    faults: AtomicU64,
    /// Whether unpopulated pages are protected too (kernel 6.4+).
    unpopulated: bool,
}

/// Write-protect watch over some ranges, ringing `door` on the first write.
pub struct WriteWatch {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl WriteWatch {
    /// A watch ringing `door`; `Err` where the kernel offers no userfaultfd
    /// write protection to this process.
    pub fn new(door: Arc<Doorbell>) -> io::Result<WriteWatch> {
        Self::open(door, true)
    }

    /// As [`WriteWatch::new`]; `unpopulated`: ask for the protection of pages
    /// not present (Linux 6.4+), else make every watched page present.
    fn open(door: Arc<Doorbell>, unpopulated: bool) -> io::Result<WriteWatch> {
        if unpopulated {
            let uffd = Self::userfaultfd()?;
            let mut api = Api { api: UFFD_API, features: UFFD_FEATURE_WP_UNPOPULATED, ioctls: 0 };
            if ioctl(&uffd, UFFDIO_API, &mut api).is_ok() {
                return Self::with(uffd, door, true);
            }
            // An older kernel refused the feature; UFFDIO_API is allowed once per descriptor.
        }
        let uffd = Self::userfaultfd()?;
        let mut api = Api { api: UFFD_API, features: 0, ioctls: 0 };
        ioctl(&uffd, UFFDIO_API, &mut api)?;
        Self::with(uffd, door, false)
    }

    /// A new userfaultfd for user-mode faults (all faults before Linux 5.11).
    fn userfaultfd() -> io::Result<OwnedFd> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: the userfaultfd syscall takes one int of flags and returns a new descriptor or -1.
        let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) };
        if fd < 0 {
            // SAFETY: as above, without the flag kernels before 5.11 do not know.
            fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        }
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor this process owns alone.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
    }

    fn with(uffd: OwnedFd, door: Arc<Doorbell>, unpopulated: bool) -> io::Result<WriteWatch> {
        let shared = Arc::new(Shared {
            uffd,
            ranges: Mutex::new(HashMap::new()),
            door,
            stop: AtomicBool::new(false),
            faults: AtomicU64::new(0),
            unpopulated,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new().name("ibdxnet-wwatch".into()).spawn(move || s.run())?;
        Ok(WriteWatch { shared, thread: Some(thread) })
    }

    /// Watches `[addr, addr + len)` (page-aligned, anonymous private memory).
    /// Before Linux 6.4 the kernel protects only pages present, so then every
    /// page is made present first, keeping its bytes (an atomic add of 0,
    /// safe beside other writers).
    ///
    /// # Safety
    /// The range must stay mapped until [`WriteWatch::unwatch`] (or the drop).
    pub unsafe fn watch(&self, addr: *mut u8, len: usize) -> io::Result<()> {
        if !self.shared.unpopulated {
            populate_writable(addr, len)?;
        }
        let mut reg =
            Register { range: Range { start: addr as u64, len: len as u64 }, mode: UFFDIO_REGISTER_MODE_WP, ioctls: 0 };
        ioctl(&self.shared.uffd, UFFDIO_REGISTER, &mut reg)?;
        let w = Arc::new(Watched { len: len as u64, armed: AtomicBool::new(false) });
        lock(&self.shared.ranges).insert(addr as u64, w);
        Ok(())
    }

    /// Whether the range at `addr` is watched.
    pub fn is_watching(&self, addr: *mut u8) -> bool {
        lock(&self.shared.ranges).contains_key(&(addr as u64))
    }

    /// Stops watching the range at `addr` (lifts any protection; a held writer goes on).
    pub fn unwatch(&self, addr: *mut u8) {
        if let Some(w) = lock(&self.shared.ranges).remove(&(addr as u64)) {
            let mut r = Range { start: addr as u64, len: w.len };
            if let Err(e) = ioctl(&self.shared.uffd, UFFDIO_UNREGISTER, &mut r) {
                log::warn!("write watch: unregistering {addr:p}: {e}");
            }
        }
    }

    /// Write-protects every watched range not armed yet; the first write into
    /// one rings the doorbell. False if a range could not be armed (the
    /// caller must not rely on the watch for it now).
    pub fn arm(&self) -> bool {
        let ranges = lock(&self.shared.ranges);
        let mut all = true;
        for (&start, w) in ranges.iter() {
            if w.armed.load(Ordering::Acquire) {
                continue;
            }
            w.armed.store(true, Ordering::Release);
            let mut wp = WriteProtect { range: Range { start, len: w.len }, mode: UFFDIO_WRITEPROTECT_MODE_WP };
            if let Err(e) = ioctl(&self.shared.uffd, UFFDIO_WRITEPROTECT, &mut wp) {
                w.armed.store(false, Ordering::Release);
                log::warn!("write watch: arming {start:#x}: {e}");
                all = false;
            }
        }
        all
    }

    /// Readable while a fault waits to be taken: a sleeper may wait on it
    /// beside its doorbell (this watch's thread reads and resolves it).
    pub fn fault_fd(&self) -> std::os::fd::RawFd {
        self.shared.uffd.as_raw_fd()
    }

    /// Faults taken so far.
    pub fn faults(&self) -> u64 {
        self.shared.faults.load(Ordering::Relaxed)
    }
}

impl Drop for WriteWatch {
    fn drop(&mut self) {
        let starts: Vec<u64> = lock(&self.shared.ranges).keys().copied().collect();
        for s in starts {
            self.unwatch(s as *mut u8);
        }
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    /// The watch thread: take faults, lift the protection, ring.
    fn run(&self) {
        let mut msgs = [Msg { event: 0, _reserved: [0; 7], flags: 0, address: 0, _feat: 0 }; 16];
        while !self.stop.load(Ordering::Acquire) {
            let mut pfd = libc::pollfd { fd: self.uffd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one initialised pollfd; a 50 ms timeout lets `stop` be seen.
            let rc = unsafe { libc::poll(&mut pfd, 1, 50) };
            if rc <= 0 {
                continue;
            }
            let size = std::mem::size_of_val(&msgs);
            // SAFETY: reads at most `size` bytes into `msgs`, plain integers for any bit pattern.
            let n = unsafe { libc::read(self.uffd.as_raw_fd(), msgs.as_mut_ptr().cast(), size) };
            if n <= 0 {
                continue;
            }
            for m in &msgs[..n as usize / std::mem::size_of::<Msg>()] {
                if m.event == UFFD_EVENT_PAGEFAULT {
                    self.resolve(m.address);
                }
            }
        }
    }

    /// Lifts the protection of the range holding `addr` (which wakes the
    /// writer) and rings the doorbell.
    fn resolve(&self, addr: u64) {
        self.faults.fetch_add(1, Ordering::Relaxed);
        let page = 4096u64;
        let range = {
            let ranges = lock(&self.ranges);
            ranges
                .iter()
                .find(|(&s, w)| addr >= s && addr < s + w.len)
                .map(|(&s, w)| {
                    w.armed.store(false, Ordering::Release);
                    Range { start: s, len: w.len }
                })
                .unwrap_or(Range { start: addr & !(page - 1), len: page })
        };
        let mut wp = WriteProtect { range, mode: 0 };
        if let Err(e) = ioctl(&self.uffd, UFFDIO_WRITEPROTECT, &mut wp) {
            log::error!("write watch: lifting the protection at {addr:#x}: {e}");
        }
        self.door.wake_if_sleeping();
    }
}

/// Makes every page of the range present and writable, keeping its bytes:
/// `MADV_POPULATE_WRITE` (Linux 5.14+), else a compare-and-swap of each
/// page's first byte with itself (a write the compiler cannot drop, safe
/// beside other writers; a read alone would map the shared zero page).
fn populate_writable(addr: *mut u8, len: usize) -> io::Result<()> {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    // SAFETY: the caller of `watch` vouches for the mapping; the advice changes no byte.
    if unsafe { libc::madvise(addr.cast(), len, MADV_POPULATE_WRITE) } == 0 {
        return Ok(());
    }
    for off in (0..len).step_by(4096) {
        // SAFETY: inside the mapping (see `watch`); byte-sized atomics need no alignment.
        let b = unsafe { &*(addr.add(off) as *const std::sync::atomic::AtomicU8) };
        let v = b.load(Ordering::Relaxed);
        let _ = b.compare_exchange(v, v, Ordering::Relaxed, Ordering::Relaxed);
    }
    Ok(())
}

fn ioctl<T>(fd: &OwnedFd, req: libc::c_ulong, arg: &mut T) -> io::Result<()> {
    // SAFETY: `req` is a userfaultfd ioctl whose argument struct is `T`, which `arg` points to.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req, arg as *mut T) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::region::Region;
    use std::time::{Duration, Instant};

    #[test]
    fn a_write_into_an_armed_range_rings_once_and_goes_through() {
        let door = Arc::new(Doorbell::new().unwrap());
        let Ok(w) = WriteWatch::new(door.clone()) else {
            eprintln!("no userfaultfd here: skipped");
            return;
        };
        let r = Region::new(1 << 16).unwrap();
        // SAFETY: the region outlives the watch's use of it (unwatched or dropped first).
        unsafe { w.watch(r.ptr(), r.len()) }.unwrap();
        assert!(w.arm());
        door.announce();
        let addr = r.ptr() as usize;
        let t0 = Instant::now();
        let writer = std::thread::spawn(move || {
            // SAFETY: inside the region, which outlives the join below.
            unsafe { (addr as *mut u8).add(5000).write_volatile(7) };
        });
        let woken = door.wait(&[], Duration::from_secs(5)).unwrap();
        assert!(woken.rung, "the write rang the doorbell");
        assert!(t0.elapsed() < Duration::from_secs(1));
        writer.join().unwrap();
        // SAFETY: inside the region.
        assert_eq!(unsafe { r.ptr().add(5000).read_volatile() }, 7);
        assert_eq!(w.faults(), 1);
        // Not armed again: further writes go through without a fault.
        // SAFETY: inside the region.
        unsafe { r.ptr().add(9000).write_volatile(1) };
        assert_eq!(w.faults(), 1);
        // Armed again: a write faults again (a page never touched too, where the kernel can).
        assert!(w.arm());
        // SAFETY: inside the region.
        unsafe { r.ptr().add(5001).write_volatile(2) };
        assert_eq!(w.faults(), 2);
        assert!(w.arm());
        // SAFETY: inside the region; this page was never written by the test.
        unsafe { r.ptr().add(40_000).write_volatile(3) };
        assert_eq!(w.faults(), 3);
        w.unwatch(r.ptr());
    }

    #[test]
    fn every_armed_round_rings() {
        // Without the protection of pages not present (as before Linux 6.4):
        // the watch makes them present.
        let door = Arc::new(Doorbell::new().unwrap());
        let Ok(w) = WriteWatch::open(door.clone(), false) else {
            eprintln!("no userfaultfd here: skipped");
            return;
        };
        let r = Region::new(1 << 20).unwrap();
        // SAFETY: the region outlives the watch's use of it (unwatched or dropped first).
        unsafe { w.watch(r.ptr(), r.len()) }.unwrap();
        let addr = r.ptr() as usize;
        for i in 0..200usize {
            door.announce();
            assert!(w.arm());
            let writer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_micros(300));
                // SAFETY: inside the region, which outlives the join below.
                unsafe { (addr as *mut u8).add(i * 64).write_volatile(1) };
            });
            let woken = door.wait(&[], Duration::from_secs(2)).unwrap();
            door.retract();
            writer.join().unwrap();
            assert!(woken.rung, "round {i}: not rung");
        }
        assert_eq!(w.faults(), 200);
    }
}
