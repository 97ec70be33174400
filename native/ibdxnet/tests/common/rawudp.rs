//! Raw IPv4 sockets for the spoofing tests (root only): send UDP datagrams
//! with any source address, and record the datagrams between two ports.
#![allow(dead_code)]

use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// True if this process may open raw sockets (it is root).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn raw_socket(protocol: i32) -> OwnedFd {
    // SAFETY: plain socket(2) call; the descriptor is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, protocol) };
    assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Sends UDP datagrams with a forged source (IP_HDRINCL via IPPROTO_RAW).
pub struct Spoofer(OwnedFd);

impl Spoofer {
    pub fn new() -> Spoofer {
        Spoofer(raw_socket(libc::IPPROTO_RAW))
    }

    /// Sends `payload` to `to` as if from `from`.
    pub fn send(&self, from: SocketAddrV4, to: SocketAddrV4, payload: &[u8]) {
        let total = 20 + 8 + payload.len();
        let mut p = Vec::with_capacity(total);
        p.extend_from_slice(&[0x45, 0]);
        p.extend_from_slice(&(total as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0x40, 0, 64, libc::IPPROTO_UDP as u8, 0, 0]); // id, DF, ttl, proto, checksum (kernel)
        p.extend_from_slice(&from.ip().octets());
        p.extend_from_slice(&to.ip().octets());
        p.extend_from_slice(&from.port().to_be_bytes());
        p.extend_from_slice(&to.port().to_be_bytes());
        p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]); // no UDP checksum (allowed on IPv4)
        p.extend_from_slice(payload);
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(to.ip().octets()) },
            sin_zero: [0; 8],
        };
        // SAFETY: `p` and `sa` are valid for the lengths given.
        let n = unsafe {
            libc::sendto(
                self.0.as_raw_fd(),
                p.as_ptr().cast(),
                p.len(),
                0,
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        assert_eq!(n, p.len() as isize, "raw sendto: {}", std::io::Error::last_os_error());
    }
}

/// Records the payloads of UDP datagrams from port `from` to port `to` on
/// this host until stopped.
pub struct Recorder {
    stop: Arc<AtomicBool>,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
    thread: Option<JoinHandle<()>>,
}

impl Recorder {
    pub fn start(from: u16, to: u16) -> Recorder {
        let fd = raw_socket(libc::IPPROTO_UDP);
        let tv = libc::timeval { tv_sec: 0, tv_usec: 20_000 };
        // SAFETY: `tv` is a valid timeval for SO_RCVTIMEO.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "SO_RCVTIMEO: {}", std::io::Error::last_os_error());
        let (stop, got) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let (s, g) = (stop.clone(), got.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !s.load(Ordering::Acquire) {
                // SAFETY: `buf` is writable for its length.
                let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
                if n <= 0 {
                    continue;
                }
                let pkt = &buf[..n as usize];
                let ihl = usize::from(pkt[0] & 0x0F) * 4;
                if pkt.len() < ihl + 8 {
                    continue;
                }
                let udp = &pkt[ihl..];
                let (sp, dp) = (u16::from_be_bytes([udp[0], udp[1]]), u16::from_be_bytes([udp[2], udp[3]]));
                if sp == from && dp == to {
                    g.lock().unwrap().push(udp[8..].to_vec());
                }
            }
        });
        Recorder { stop, got, thread: Some(thread) }
    }

    /// The payloads recorded so far, in arrival order.
    pub fn snapshot(&self) -> Vec<Vec<u8>> {
        self.got.lock().unwrap().clone()
    }

    /// Stops recording; returns the payloads in arrival order.
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        self.stop.store(true, Ordering::Release);
        self.thread.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.got.lock().unwrap())
    }
}
