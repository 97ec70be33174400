//! Small helpers shared by several modules.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// Fills `out` from the kernel's random number generator (`getrandom`),
/// falling back to [`hash_random_u32`] if it fails (it does not on any
/// kernel since 3.17).
pub fn random_bytes(out: &mut [u8]) {
    let mut filled = 0;
    while filled < out.len() {
        let rest = &mut out[filled..];
        // SAFETY: `rest` is valid writable memory of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n > 0 {
            filled += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            for b in rest.iter_mut() {
                *b = hash_random_u32() as u8;
            }
            return;
        }
    }
}

/// A random 32-bit number from the kernel (PSNs, instance ids: unpredictable
/// to an outsider).
pub fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    random_bytes(&mut b);
    u32::from_ne_bytes(b)
}

/// A random 32-bit number seeded per process by the standard library's hash
/// randomisation (the fallback of [`random_bytes`]).
fn hash_random_u32() -> u32 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    (h.finish() >> 16) as u32
}

/// Locks a mutex, ignoring poisoning: no user code runs under this crate's
/// locks, so a panic elsewhere cannot leave the guarded state half-updated.
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A non-blocking `eventfd`: readable from a `signal` until `reset`.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A new, unsignalled eventfd.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain system call; a valid fd or -1 comes back.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes it readable.
    pub fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our eventfd. It fails
        // only when the counter is near overflow (it is then readable anyway).
        let _ = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Makes it unreadable again.
    pub fn reset(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer; non-blocking, so
        // an unsignalled eventfd gives EAGAIN, which is fine.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    }

    /// The descriptor, to wait on.
    pub fn raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Tests only: the section of the document `doc` (a path from the
/// repository's root, such as `docs/configuration.md`) between
/// `<!-- {marker}: begin -->` and `<!-- {marker}: end -->` must be `want`
/// (a table generated from the code); with `IBDXNET_UPDATE_README=1` it is
/// rewritten instead of failing.
#[cfg(test)]
pub(crate) fn check_doc_section(doc: &str, marker: &str, want: &str, what: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(doc);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let (begin, end) = (format!("<!-- {marker}: begin -->\n"), format!("<!-- {marker}: end -->"));
    let start = text.find(&begin).unwrap_or_else(|| panic!("{doc} has no begin marker {begin:?}")) + begin.len();
    let stop = start + text[start..].find(&end).unwrap_or_else(|| panic!("{doc} has no end marker {end:?}"));
    if text[start..stop] != *want {
        if std::env::var_os("IBDXNET_UPDATE_README").is_some() {
            std::fs::write(&path, format!("{}{want}{}", &text[..start], &text[stop..])).unwrap();
            return;
        }
        panic!("{doc}'s {what} differs from the code; run with IBDXNET_UPDATE_README=1 to regenerate:\n{want}");
    }
}
