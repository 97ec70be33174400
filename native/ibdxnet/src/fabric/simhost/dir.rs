//! The device directory: where devices publish themselves, how a peer is
//! found and how its death is noticed.
//!
//! Each device owns `<addr>.dev` (its doorbell) and one `<addr>-<qpn>.qp`
//! channel file per queue pair. A device holds an exclusive `flock` on its
//! `.dev` file for its whole life, taken before the file gets its name: a
//! `.dev` file whose lock can be taken belongs to a dead device (the kernel
//! drops the lock with the process). Opening a device sweeps the files of
//! dead ones.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::shm::{Doorbell, Mapping};

/// Environment variable naming the device directory.
pub const ENV_DIR: &str = "IBDXNET_SIMHOST_DIR";

/// Identifies a device file of this format.
const DEV_MAGIC: u64 = 0x6962_6478_7368_6476; // "ibdxshdv"
/// Size of a device file.
const DEV_BYTES: usize = 4096;

/// The shared part of a device file.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct DevHdr {
    pub magic: std::sync::atomic::AtomicU64,
    pub addr: std::sync::atomic::AtomicU64,
    pub pid: std::sync::atomic::AtomicU32,
    pub doorbell: Doorbell,
}

/// The directory to use: `configured`, else [`ENV_DIR`], else
/// `/dev/shm/ibdxnet-simhost-<uid>`, else `$XDG_RUNTIME_DIR/ibdxnet-simhost`,
/// else the temporary directory.
pub(crate) fn resolve(configured: Option<&Path>) -> PathBuf {
    if let Some(p) = configured {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os(ENV_DIR).filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    if Path::new("/dev/shm").is_dir() {
        return PathBuf::from(format!("/dev/shm/ibdxnet-simhost-{uid}"));
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p).join("ibdxnet-simhost"),
        None => std::env::temp_dir().join(format!("ibdxnet-simhost-{uid}")),
    }
}

/// The network id of `dir`: equal for every process of this boot using the
/// same directory, never 0 (0 means an RDMA device).
pub(crate) fn network_id(dir: &Path) -> u64 {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let canon = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    // FNV-1a: stable across builds, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in boot.trim().bytes().chain([0]).chain(canon.as_os_str().as_encoded_bytes().iter().copied()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h | 1
}

pub(crate) fn dev_path(dir: &Path, addr: u64) -> PathBuf {
    dir.join(format!("{addr:012x}.dev"))
}

pub(crate) fn qp_path(dir: &Path, addr: u64, qpn: u32) -> PathBuf {
    dir.join(format!("{addr:012x}-{qpn:06x}.qp"))
}

/// Takes `how` (`LOCK_EX`/`LOCK_SH`) on `file` without blocking; true if taken.
fn try_flock(file: &File, how: i32) -> bool {
    // SAFETY: flock on a descriptor we own.
    unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) == 0 }
}

/// Creates `path` atomically with `len` zero bytes, prepared by `init`
/// before it gets its name (so no one sees it half made).
pub(crate) fn create_named(path: &Path, len: u64, init: impl FnOnce(&File) -> io::Result<()>) -> io::Result<File> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&tmp)?;
    let done = file.set_len(len).and_then(|()| init(&file)).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(file)
}

/// This device's published file: locked for the device's life.
#[derive(Debug)]
pub(crate) struct Published {
    path: PathBuf,
    map: Mapping,
    _file: File,
}

impl Published {
    /// Creates the directory if needed, sweeps dead devices, publishes `addr`.
    pub fn create(dir: &Path, addr: u64) -> io::Result<Published> {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        check_private(dir)?;
        sweep(dir);
        let path = dev_path(dir, addr);
        let file = create_named(&path, DEV_BYTES as u64, |f| {
            if !try_flock(f, libc::LOCK_EX) {
                return Err(io::Error::last_os_error());
            }
            let map = Mapping::new(f, DEV_BYTES)?;
            // SAFETY: DevHdr holds only atomics and fits into the page.
            let hdr: &DevHdr = unsafe { map.header() };
            hdr.addr.store(addr, std::sync::atomic::Ordering::Relaxed);
            hdr.pid.store(std::process::id(), std::sync::atomic::Ordering::Relaxed);
            hdr.magic.store(DEV_MAGIC, std::sync::atomic::Ordering::Release);
            Ok(())
        })?;
        let map = Mapping::new(&file, DEV_BYTES)?;
        Ok(Published { path, map, _file: file })
    }

    /// The device's doorbell.
    pub fn doorbell(&self) -> &Doorbell {
        // SAFETY: as in `create`.
        &unsafe { self.map.header::<DevHdr>() }.doorbell
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        // The lock goes with the descriptor, after the name.
    }
}

/// Another device, as seen from here.
#[derive(Debug)]
pub(crate) struct PeerDevice {
    file: File,
    map: Mapping,
}

impl PeerDevice {
    /// Opens the device `addr` of `dir`; `None` if it is not published.
    pub fn open(dir: &Path, addr: u64) -> Option<PeerDevice> {
        let file = OpenOptions::new().read(true).write(true).open(dev_path(dir, addr)).ok()?;
        let map = Mapping::new(&file, DEV_BYTES).ok()?;
        // SAFETY: DevHdr holds only atomics and fits into the page.
        let hdr: &DevHdr = unsafe { map.header() };
        let ok = hdr.magic.load(std::sync::atomic::Ordering::Acquire) == DEV_MAGIC
            && hdr.addr.load(std::sync::atomic::Ordering::Relaxed) == addr;
        ok.then_some(PeerDevice { file, map })
    }

    /// The peer's doorbell.
    pub fn doorbell(&self) -> &Doorbell {
        // SAFETY: checked in `open`.
        &unsafe { self.map.header::<DevHdr>() }.doorbell
    }

    /// True while the owner holds its lock (its process lives and has not
    /// closed the device). Two system calls.
    pub fn alive(&self) -> bool {
        if try_flock(&self.file, libc::LOCK_SH) {
            // SAFETY: unlocks what we just locked, on our descriptor.
            unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
            return false;
        }
        true
    }
}

/// Refuses a directory that is not ours alone: anyone else who may write
/// there could replace channel files.
fn check_private(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir)?;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "not a directory of uid {uid} writable by it alone (owner {}, mode {:o})",
                m.uid(),
                m.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Removes the files of devices whose lock can be taken (they are dead).
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut dead = Vec::new();
    let mut tmp = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(addr) = name.strip_suffix(".dev").and_then(|a| u64::from_str_radix(a, 16).ok()) {
            if let Ok(f) = File::open(e.path()) {
                if try_flock(&f, libc::LOCK_EX) {
                    dead.push(format!("{addr:012x}"));
                }
            }
        } else if name.contains(".tmp") {
            tmp.push(e.path());
        }
    }
    if dead.is_empty() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if dead.iter().any(|d| name.starts_with(d.as_str()) && !name.contains(".tmp")) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    // Temporary files of processes that no longer exist.
    for p in tmp {
        let pid = p.extension().and_then(|x| x.to_str()).and_then(|x| x.strip_prefix("tmp")?.parse::<i32>().ok());
        // SAFETY: kill with signal 0 only checks for the process.
        if pid.is_some_and(|pid| unsafe { libc::kill(pid, 0) } != 0) {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ibdxnet-simhost-dir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn dead_devices_are_swept_and_live_ones_kept() {
        let d = scratch("sweep");
        let live = Published::create(&d, 0xAAA).unwrap();
        // A device that died: its file exists but nobody holds the lock.
        std::fs::write(dev_path(&d, 0xBBB), [0u8; DEV_BYTES]).unwrap();
        std::fs::write(qp_path(&d, 0xBBB, 0x11), b"x").unwrap();
        let peer = PeerDevice::open(&d, 0xAAA).expect("published");
        assert!(peer.alive());
        let other = Published::create(&d, 0xCCC).unwrap();
        assert!(!dev_path(&d, 0xBBB).exists() && !qp_path(&d, 0xBBB, 0x11).exists(), "dead files swept");
        assert!(dev_path(&d, 0xAAA).exists(), "live device kept");
        drop(live);
        assert!(!peer.alive(), "a closed device is dead");
        assert!(PeerDevice::open(&d, 0xAAA).is_none(), "and unpublished");
        drop(other);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_directory_others_may_write_is_refused() {
        let d = scratch("perm");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Published::create(&d, 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
