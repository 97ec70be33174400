//! A queue pair's channel file: its shared state and the single-producer /
//! single-consumer byte ring its peer writes messages into.
//!
//! The file is created by the receiving queue pair (the consumer) and mapped
//! by the one remote queue pair it is connected to (the producer). Positions
//! are byte counts that only grow; the slot of position `p` is `p % cap`.
//! A record is a [`RecHdr`] followed by its payload, padded to
//! [`REC_ALIGN`]; a record that would cross the end of the buffer is
//! preceded by a pad record filling the rest. The producer publishes records
//! by storing `head` (release), the consumer frees them by storing `tail`
//! (release) only after the data was placed and its completion queued: the
//! consumer's `tail` is the acknowledgement the sender completes against.
//! A refused message is named in `nak_seq`/`nak_status` before `tail`
//! passes it.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::shm::Mapping;

/// Identifies a channel file of this format.
pub(crate) const MAGIC: u64 = 0x6962_6478_7368_3031; // "ibdxsh01"
/// Alignment and granule of records.
pub(crate) const REC_ALIGN: usize = 32;
/// Bytes before the ring data (one page).
pub(crate) const HDR_BYTES: usize = 4096;

/// Queue pair states as the channel file shows them.
pub(crate) const ST_RESET: u32 = 0;
pub(crate) const ST_RTS: u32 = 3;
pub(crate) const ST_ERROR: u32 = 4;
pub(crate) const ST_DESTROYED: u32 = 5;

/// Record flags.
pub(crate) const F_FIRST: u32 = 1;
pub(crate) const F_LAST: u32 = 2;
pub(crate) const F_IMM: u32 = 4;
pub(crate) const F_PAD: u32 = 8;

/// Written once by the creator before the file gets its final name.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Ident {
    pub magic: AtomicU64,
    pub cap: AtomicU64,
    pub owner_addr: AtomicU64,
    pub owner_qpn: AtomicU32,
}

/// The owner's state and whom it is connected to (written by the owner).
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Control {
    pub state: AtomicU32,
    pub remote_qpn: AtomicU32,
    pub remote_addr: AtomicU64,
}

/// The consumer's line: how far it consumed, and a refused message.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct ConsumerLine {
    pub tail: AtomicU64,
    /// Sequence number + 1 of the refused message (0: none).
    pub nak_seq: AtomicU64,
    pub nak_status: AtomicU32,
}

/// The producer's line.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct ProducerLine {
    pub head: AtomicU64,
}

/// The header page of a channel file.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct ChannelHdr {
    pub ident: Ident,
    pub control: Control,
    pub consumer: ConsumerLine,
    pub producer: ProducerLine,
}

const _: () = assert!(std::mem::size_of::<ChannelHdr>() <= HDR_BYTES);

/// The header of one record, copied out of the ring before use.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RecHdr {
    /// Payload bytes in this record.
    pub len: u32,
    /// `F_*` bits.
    pub flags: u32,
    /// Bytes of the whole message (all its records).
    pub total: u32,
    /// Immediate data (valid with `F_IMM`).
    pub imm: u32,
    /// The sender's sequence number of the message.
    pub seq: u64,
    pub reserved: u64,
}

const _: () = assert!(std::mem::size_of::<RecHdr>() == REC_ALIGN);

/// Bytes a record with `len` payload bytes takes.
pub(crate) fn rec_size(len: usize) -> usize {
    (REC_ALIGN + len).div_ceil(REC_ALIGN) * REC_ALIGN
}

/// A mapped channel file.
#[derive(Debug)]
pub(crate) struct Channel {
    map: Mapping,
    cap: u64,
}

/// A record the consumer looked at (not yet freed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peeked {
    pub hdr: RecHdr,
    /// Start of the payload inside the mapping.
    pub payload: *const u8,
    /// The position after the record: store it as `tail` to free it.
    pub next: u64,
}

impl Channel {
    /// Maps the channel file `file` and checks its identity. `cap` is only
    /// for new files (0 when opening someone else's).
    pub fn map(file: &File, new_cap: Option<(u64, u64, u32)>) -> io::Result<Channel> {
        if let Some((cap, _, _)) = new_cap {
            file.set_len(HDR_BYTES as u64 + cap)?;
        }
        let head = Mapping::new(file, HDR_BYTES)?;
        // SAFETY: the header page holds only atomics, is page aligned and
        // fits into HDR_BYTES (asserted above).
        let hdr: &ChannelHdr = unsafe { head.header() };
        if let Some((cap, addr, qpn)) = new_cap {
            hdr.ident.cap.store(cap, Ordering::Relaxed);
            hdr.ident.owner_addr.store(addr, Ordering::Relaxed);
            hdr.ident.owner_qpn.store(qpn, Ordering::Relaxed);
            hdr.ident.magic.store(MAGIC, Ordering::Release);
        }
        let cap = hdr.ident.cap.load(Ordering::Relaxed);
        if hdr.ident.magic.load(Ordering::Acquire) != MAGIC
            || !cap.is_power_of_two()
            || !(4096..=1 << 30).contains(&cap)
        {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not a simhost channel file"));
        }
        drop(head);
        let map = Mapping::new(file, HDR_BYTES + cap as usize)?;
        Ok(Channel { map, cap })
    }

    /// The shared header.
    pub fn hdr(&self) -> &ChannelHdr {
        // SAFETY: checked in `map`: the header page is mapped and holds only
        // atomics, valid for any bit pattern.
        unsafe { self.map.header() }
    }

    /// The largest payload one record may carry.
    pub fn max_fragment(&self) -> usize {
        (self.cap / 4) as usize - REC_ALIGN
    }

    fn slot(&self, pos: u64) -> *mut u8 {
        // SAFETY: `pos % cap` < cap, and the data area of `cap` bytes starts
        // at HDR_BYTES inside the mapping.
        unsafe { self.map.ptr().add(HDR_BYTES + (pos & (self.cap - 1)) as usize) }
    }

    /// Producer: appends a record of `hdr.len` payload bytes, filled by
    /// `fill(dst)` (which must write exactly `hdr.len` bytes at `dst`), and
    /// publishes it. Returns the position after it, or `None` if the ring
    /// has no room now.
    ///
    /// Only the one producer of this ring may call this (callers serialise
    /// under their queue pair's lock).
    pub fn push(&self, hdr: RecHdr, fill: impl FnOnce(*mut u8)) -> Option<u64> {
        let line = &self.hdr().producer;
        let head = line.head.load(Ordering::Relaxed);
        let tail = self.hdr().consumer.tail.load(Ordering::Acquire);
        let size = rec_size(hdr.len as usize) as u64;
        assert!(size <= self.cap / 2, "record of {size} bytes in a ring of {}", self.cap);
        let to_end = self.cap - (head & (self.cap - 1));
        let pad = if to_end < size { to_end } else { 0 };
        if head + pad + size - tail > self.cap {
            return None;
        }
        let mut pos = head;
        if pad > 0 {
            let p = RecHdr { len: (pad as usize - REC_ALIGN) as u32, flags: F_PAD, ..Default::default() };
            // SAFETY: [pos, pos+pad) is free (checked against tail) and lies
            // before the end of the data area; the consumer does not read it
            // before `head` is published below.
            unsafe { std::ptr::write_unaligned(self.slot(pos).cast::<RecHdr>(), p) };
            pos += pad;
        }
        // SAFETY: as above for [pos, pos+size): free, contiguous (no wrap,
        // thanks to the pad) and unpublished until the store of `head`.
        unsafe {
            std::ptr::write_unaligned(self.slot(pos).cast::<RecHdr>(), hdr);
            fill(self.slot(pos).add(REC_ALIGN));
        }
        pos += size;
        line.head.store(pos, Ordering::Release);
        Some(pos)
    }

    /// Consumer: the record at `tail`, pads skipped, or `None` if there is
    /// none. `Err` if the producer wrote something malformed.
    pub fn peek(&self) -> Result<Option<Peeked>, ()> {
        let mut pos = self.hdr().consumer.tail.load(Ordering::Relaxed);
        let head = self.hdr().producer.head.load(Ordering::Acquire);
        loop {
            if pos == head {
                return Ok(None);
            }
            let avail = head.wrapping_sub(pos);
            let to_end = self.cap - (pos & (self.cap - 1));
            if avail > self.cap || avail < REC_ALIGN as u64 || pos % REC_ALIGN as u64 != 0 {
                return Err(());
            }
            // SAFETY: [pos, pos+32) was published (head is past it, and a
            // header never crosses the end: positions are 32-aligned).
            let hdr = unsafe { std::ptr::read_unaligned(self.slot(pos).cast::<RecHdr>()) };
            let size = rec_size(hdr.len as usize) as u64;
            if size > avail || size > to_end {
                return Err(());
            }
            if hdr.flags & F_PAD != 0 {
                pos += size;
                continue;
            }
            // SAFETY: the payload lies inside the published, contiguous record.
            let payload = unsafe { self.slot(pos).add(REC_ALIGN) as *const u8 };
            return Ok(Some(Peeked { hdr, payload, next: pos + size }));
        }
    }

    /// Consumer: frees everything before `next` (after the data was used).
    pub fn release(&self, next: u64) {
        self.hdr().consumer.tail.store(next, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_channel(cap: u64) -> (File, Channel) {
        // SAFETY: plain system call with a static, NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"ring-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: `fd` was just created and is owned by nobody else.
        let file = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let ch = Channel::map(&file, Some((cap, 1, 1))).unwrap();
        (file, ch)
    }

    fn byte(seq: u64, i: usize) -> u8 {
        (seq as usize).wrapping_mul(31).wrapping_add(i) as u8
    }

    /// A producer and a consumer thread on separate mappings of one file
    /// pass records of random sizes (wrapping many times); every record
    /// arrives once, in order, intact.
    #[test]
    fn spsc_stress_keeps_order_and_content() {
        let cap = 8192u64;
        let (file, prod) = temp_channel(cap);
        let cons = Channel::map(&file, None).unwrap();
        let n = 200_000u64;
        let t = std::thread::spawn(move || {
            let mut rng = 0x1234_5678u32;
            let mut seq = 0u64;
            while seq < n {
                rng ^= rng << 13;
                rng ^= rng >> 17;
                rng ^= rng << 5;
                let len = (rng % 1500) as usize;
                let hdr = RecHdr { len: len as u32, seq, total: len as u32, ..Default::default() };
                let pushed = prod.push(hdr, |dst| {
                    for i in 0..len {
                        // SAFETY: `push` hands out `len` writable bytes.
                        unsafe { dst.add(i).write(byte(seq, i)) };
                    }
                });
                if pushed.is_some() {
                    seq += 1;
                } else {
                    std::thread::yield_now();
                }
            }
        });
        let mut want = 0u64;
        while want < n {
            match cons.peek().expect("well formed") {
                None => std::thread::yield_now(),
                Some(p) => {
                    assert_eq!(p.hdr.seq, want);
                    for i in 0..p.hdr.len as usize {
                        // SAFETY: the payload of a peeked record is readable
                        // until it is released.
                        assert_eq!(unsafe { p.payload.add(i).read() }, byte(want, i), "seq {want} byte {i}");
                    }
                    cons.release(p.next);
                    want += 1;
                }
            }
        }
        t.join().unwrap();
        assert_eq!(cons.peek().unwrap().map(|p| p.hdr.seq), None);
    }

    #[test]
    fn malformed_records_are_refused() {
        let (_file, ch) = temp_channel(4096);
        ch.push(RecHdr { len: 8, ..Default::default() }, |_| {}).unwrap();
        // SAFETY: overwrite the published header with a huge length, as a
        // broken peer might.
        unsafe { std::ptr::write_unaligned(ch.slot(0).cast::<u32>(), 1 << 20) };
        assert!(ch.peek().is_err());
    }
}
