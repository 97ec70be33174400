//! Copies between scatter/gather lists and the ring.

use crate::fabric::Sge;

/// The pieces of `sges` that bytes `[off, off+len)` of their concatenation
/// fall into: (sge, offset inside it, length).
pub(crate) fn covering(sges: &[Sge], off: u32, len: u32) -> impl Iterator<Item = (&Sge, u64, u32)> {
    let (mut skip, mut left) = (u64::from(off), u64::from(len));
    sges.iter().filter_map(move |s| {
        let l = u64::from(s.length);
        if skip >= l {
            skip -= l;
            return None;
        }
        if left == 0 {
            return None;
        }
        let n = (l - skip).min(left);
        let piece = (s, skip, n as u32);
        skip = 0;
        left -= n;
        Some(piece)
    })
}

/// Copies bytes `[off, off+n)` of the concatenation of `sges` to `dst`.
///
/// # Safety
/// The SGEs must be readable for their lengths, `dst` writable for `n` bytes.
pub(crate) unsafe fn gather(sges: &[Sge], off: u64, n: u64, mut dst: *mut u8) {
    for (s, o, len) in covering(sges, off as u32, n as u32) {
        // SAFETY: inside an SGE the caller vouched for; `dst` advances
        // within the `n` bytes it vouched for.
        unsafe {
            std::ptr::copy_nonoverlapping((s.addr + o) as *const u8, dst, len as usize);
            dst = dst.add(len as usize);
        }
    }
}

/// Copies `len` bytes from `src` to bytes `[off, off+len)` of the
/// concatenation of `sges`.
///
/// # Safety
/// `src` must be readable for `len` bytes and the covered SGE ranges writable.
pub(crate) unsafe fn scatter(mut src: *const u8, len: u32, sges: &[Sge], off: u32) {
    for (s, o, n) in covering(sges, off, len) {
        // SAFETY: as the caller vouched; `src` advances within its `len` bytes.
        // `copy` tolerates a receive buffer registered twice.
        unsafe {
            std::ptr::copy(src, (s.addr + o) as *mut u8, n as usize);
            src = src.add(n as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_splits_a_range_over_sges() {
        let s = |addr, length| Sge { addr, length, lkey: 1 };
        let sges = [s(100, 10), s(200, 5), s(300, 20)];
        let got: Vec<(u64, u64, u32)> = covering(&sges, 8, 10).map(|(s, o, n)| (s.addr, o, n)).collect();
        assert_eq!(got, [(100, 8, 2), (200, 0, 5), (300, 0, 3)]);
        assert_eq!(covering(&sges, 15, 0).count(), 0);
        let mut dst = [0u8; 35];
        let src: Vec<u8> = (1..=35).collect();
        let sges = [
            Sge { addr: dst.as_mut_ptr() as u64, length: 20, lkey: 1 },
            Sge { addr: dst.as_mut_ptr() as u64 + 20, length: 15, lkey: 1 },
        ];
        // SAFETY: both SGEs cover `dst`, the source is 35 readable bytes.
        unsafe {
            scatter(src.as_ptr(), 10, &sges, 15);
            scatter(src.as_ptr().add(10), 15, &sges, 0);
        }
        assert_eq!(&dst[15..25], &src[..10]);
        assert_eq!(&dst[..15], &src[10..25]);
        let mut back = [0u8; 10];
        // SAFETY: the SGEs are readable, `back` has 10 writable bytes.
        unsafe { gather(&sges, 15, 10, back.as_mut_ptr()) };
        assert_eq!(&back, &src[..10]);
    }
}
