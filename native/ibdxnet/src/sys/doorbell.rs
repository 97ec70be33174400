//! How an engine thread sleeps until there is work (issue 15): an `eventfd`
//! doorbell and a "sleeping" word that wakers read first, so that they make
//! the system call only when the thread really sleeps.
//!
//! The protocol (Dekker style), for a sleeper S and any number of wakers W:
//! - S: `announce()` (sleeping = 1, then a full fence), then looks for work
//!   once more; finding some it `retract()`s, else it `wait()`s.
//! - W: publishes its work (any store the sleeper's re-check reads), then
//!   `wake_if_sleeping()` (a full fence, then sleeping 1 → 0 by CAS; the
//!   winner writes the eventfd).
//!
//! Both sides store, fence, then load: either W's CAS sees the 1 (and rings),
//! or S's re-check sees W's work. A ring before S blocks is kept by the
//! eventfd's counter, so `wait` returns at once: no wake-up is lost. The word
//! lives at a fixed address in its own allocation so Java can read it too
//! (`abi::SleepWord`), skipping the JNI call while the thread is awake; whoever
//! hands its address out keeps it alive with [`Doorbell::sleeping_word`], also
//! after the doorbell (and its eventfd) is gone.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::util::EventFd;

/// The word while the thread sleeps (or is about to).
const SLEEPING: u32 = 1;
/// The word while the thread is awake and found no work ([`Doorbell::mark_idle`]).
pub const IDLE: u32 = 2;

/// The doorbell of one sleeping thread.
#[derive(Debug)]
pub struct Doorbell {
    /// 1 while the thread announced that it sleeps (or is about to); the
    /// only field of `abi::SleepWord`, the layout Java reads it by.
    sleeping: Arc<AtomicU32>,
    bell: EventFd,
}

/// What ended a [`Doorbell::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Woken {
    /// The doorbell rang.
    pub rung: bool,
    /// Which of the extra descriptors became readable (bit i = extra\[i\]).
    pub ready: u32,
}

impl Doorbell {
    /// A doorbell with a non-blocking eventfd.
    pub fn new() -> io::Result<Doorbell> {
        Ok(Doorbell { sleeping: Arc::new(AtomicU32::new(0)), bell: EventFd::new()? })
    }

    /// The sleeping word itself (for Java: read it at its address, and call
    /// into the library only when it is 1). The holder keeps the word's
    /// memory valid after the doorbell is dropped; it then stays 0 or 1.
    pub fn sleeping_word(&self) -> Arc<AtomicU32> {
        self.sleeping.clone()
    }

    /// True while the thread announced sleep.
    pub fn is_sleeping(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed) == SLEEPING
    }

    /// The thread, awake, says whether its last look found no work (the
    /// send thread: then its wakers post their data themselves,
    /// `msgrc::send_agent`). Only by the thread, outside `announce` …
    /// `retract`; a store only when the value changes, so that a busy loop
    /// does not take the line from the wakers that read it.
    pub fn mark_idle(&self, idle: bool) {
        let want = if idle { IDLE } else { 0 };
        if self.sleeping.load(Ordering::Relaxed) != want {
            self.sleeping.store(want, Ordering::Relaxed);
        }
    }

    /// The sleeper is about to look for work a last time, then sleep.
    pub fn announce(&self) {
        self.sleeping.store(SLEEPING, Ordering::Relaxed);
        // Orders the store before the re-check's loads (see the module doc).
        fence(Ordering::SeqCst);
    }

    /// The sleeper found work after all, or woke up.
    pub fn retract(&self) {
        self.sleeping.store(0, Ordering::Relaxed);
    }

    /// Rings if the thread announced sleep; call after publishing the work.
    /// True if this call rang.
    pub fn wake_if_sleeping(&self) -> bool {
        // Orders the caller's publishing stores before the load of the word.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) != SLEEPING {
            return false;
        }
        if self.sleeping.compare_exchange(SLEEPING, 0, Ordering::SeqCst, Ordering::Relaxed).is_err() {
            return false; // another waker rang, the sleeper retracted, or it is awake (IDLE)
        }
        self.ring();
        true
    }

    /// Rings unconditionally (shutdown, or a waker that cannot read the word).
    pub fn ring(&self) {
        self.bell.signal();
    }

    /// Blocks until the doorbell rings, one of `extra` becomes readable, or
    /// `timeout` passes; then resets the doorbell. The caller `retract`s.
    pub fn wait(&self, extra: &[RawFd], timeout: Duration) -> io::Result<Woken> {
        let mut fds = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; 4];
        let n = 1 + extra.len().min(3);
        fds[0].fd = self.bell.raw_fd();
        for (slot, &fd) in fds[1..n].iter_mut().zip(extra) {
            slot.fd = fd;
        }
        let ms = i32::try_from(timeout.as_millis().max(1)).unwrap_or(i32::MAX);
        // SAFETY: `fds` holds `n` initialised pollfd entries.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), n as libc::nfds_t, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(Woken::default()) } else { Err(e) };
        }
        let mut woken = Woken { rung: fds[0].revents != 0, ready: 0 };
        for (i, f) in fds[1..n].iter().enumerate() {
            if f.revents != 0 {
                woken.ready |= 1 << i;
            }
        }
        if woken.rung {
            self.bell.reset();
        }
        Ok(woken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_sleeping_word_outlives_its_doorbell() {
        let d = Doorbell::new().unwrap();
        let w = d.sleeping_word();
        d.announce();
        assert_eq!(w.load(Ordering::Relaxed), 1);
        drop(d);
        // Still our allocation (ASan would report a use after free otherwise).
        assert_eq!(w.load(Ordering::Relaxed), 1);
        assert_eq!(Arc::strong_count(&w), 1);
    }

    #[test]
    fn a_ring_before_the_wait_is_not_lost() {
        let d = Doorbell::new().unwrap();
        d.announce();
        assert!(d.wake_if_sleeping());
        let t0 = Instant::now();
        let w = d.wait(&[], Duration::from_secs(5)).unwrap();
        assert!(w.rung);
        assert!(t0.elapsed() < Duration::from_secs(1));
        // Reset: the next wait times out.
        let w = d.wait(&[], Duration::from_millis(20)).unwrap();
        assert_eq!(w, Woken::default());
    }

    #[test]
    fn no_ring_while_awake() {
        let d = Doorbell::new().unwrap();
        assert!(!d.wake_if_sleeping());
        d.announce();
        d.retract();
        assert!(!d.wake_if_sleeping());
    }

    #[test]
    fn only_one_of_many_wakers_rings() {
        let d = Doorbell::new().unwrap();
        d.announce();
        let rang: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4).map(|_| s.spawn(|| usize::from(d.wake_if_sleeping()))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(rang, 1);
    }

    #[test]
    fn an_extra_descriptor_wakes_the_wait() {
        let d = Doorbell::new().unwrap();
        let other = Doorbell::new().unwrap();
        other.ring();
        let w = d.wait(&[other.bell.raw_fd()], Duration::from_secs(5)).unwrap();
        assert_eq!(w, Woken { rung: false, ready: 1 });
    }
}
