//! Owners of the variable-length shared structs: the completion list and
//! the incoming ring, each one page-aligned block (header, then entries) at
//! a stable address that Java maps.

use crate::abi::{CompletedWork, CompletedWorkList, IncomingEntry, IncomingRingHeader};
use crate::fabric::FabricError;
use crate::sys::region::Region;

const NO_SLOT: u32 = 0;

/// The completion list the send thread fills: one entry per node, bytes
/// and flow-control data summed.
pub struct CompletedList {
    region: Region,
    /// node id → entry index + 1 (0 = none); reset through the entries.
    slot_of: Box<[u32]>,
}

impl std::fmt::Debug for CompletedList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletedList").field("entries", &self.entries()).finish()
    }
}

impl CompletedList {
    /// Room for `capacity` nodes.
    pub fn new(capacity: u32) -> Result<Self, FabricError> {
        let bytes = std::mem::size_of::<CompletedWorkList>() + capacity as usize * std::mem::size_of::<CompletedWork>();
        let region = Region::new(bytes)?;
        let mut l = CompletedList { region, slot_of: vec![NO_SLOT; 1 << 16].into_boxed_slice() };
        l.header_mut().capacity = capacity;
        Ok(l)
    }

    fn header_mut(&mut self) -> &mut CompletedWorkList {
        // SAFETY: the region starts with a CompletedWorkList (page-aligned,
        // zero-initialised, which is a valid value) and is owned by `self`.
        unsafe { &mut *(self.region.ptr() as *mut CompletedWorkList) }
    }

    /// The header.
    pub fn header(&self) -> &CompletedWorkList {
        // SAFETY: as in `header_mut`.
        unsafe { &*(self.region.ptr() as *const CompletedWorkList) }
    }

    fn entries_ptr(&self) -> *mut CompletedWork {
        // SAFETY: the entries follow the 8-byte header inside the region.
        unsafe { self.region.ptr().add(std::mem::size_of::<CompletedWorkList>()) as *mut CompletedWork }
    }

    /// The valid entries.
    pub fn entries(&self) -> &[CompletedWork] {
        let n = self.header().count as usize;
        // SAFETY: `count` ≤ capacity entries are initialised (zeroed or written).
        unsafe { std::slice::from_raw_parts(self.entries_ptr(), n) }
    }

    /// Address of the header (for Java).
    pub fn address(&self) -> *const u8 {
        self.region.ptr()
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.header().count == 0
    }

    /// Adds confirmed bytes and flow-control data for `node`'s connection
    /// `connection`; numbers of an older connection of the node in the same
    /// list are dropped (its ring is abandoned). Returns false if the list is
    /// full (more nodes than the connection limit).
    pub fn add(&mut self, node: u16, connection: u32, bytes: u32, fc: u16) -> bool {
        let slot = self.slot_of[node as usize];
        let i = if slot != NO_SLOT {
            slot as usize - 1
        } else {
            let h = self.header();
            if h.count >= h.capacity {
                return false;
            }
            let i = h.count as usize;
            // SAFETY: i < capacity, inside the region.
            unsafe { *self.entries_ptr().add(i) = CompletedWork { node_id: node, fc_data: 0, bytes: 0, connection } };
            self.header_mut().count += 1;
            self.slot_of[node as usize] = i as u32 + 1;
            i
        };
        // SAFETY: i < count ≤ capacity.
        let e = unsafe { &mut *self.entries_ptr().add(i) };
        if e.connection != connection {
            *e = CompletedWork { node_id: node, fc_data: 0, bytes: 0, connection };
        }
        e.bytes = e.bytes.wrapping_add(bytes);
        e.fc_data = e.fc_data.saturating_add(fc);
        true
    }

    fn hdr_field(&self, offset: usize) -> *mut u32 {
        // SAFETY: `offset` names a u32 field of the header at the region's start.
        unsafe { self.region.ptr().add(offset) as *mut u32 }
    }

    /// Starts a hand-over: numbers it (the next `seq`) and returns the number.
    pub fn begin_handover(&mut self) -> u32 {
        let h = self.header_mut();
        h.seq = h.seq.wrapping_add(1);
        h.seq
    }

    /// True if the user acknowledged the current hand-over (`acked == seq`).
    pub fn acknowledged(&self) -> bool {
        let p = self.hdr_field(std::mem::offset_of!(CompletedWorkList, acked));
        // SAFETY: inside the header; the user may have written it (volatile).
        let acked = unsafe { std::ptr::read_volatile(p) };
        acked == self.header().seq
    }

    /// True if the user applied the previous package's results of the current hand-over.
    pub fn prev_applied(&self) -> bool {
        let p = self.hdr_field(std::mem::offset_of!(CompletedWorkList, prev_applied));
        // SAFETY: as in `acknowledged`.
        let v = unsafe { std::ptr::read_volatile(p) };
        v == self.header().seq
    }

    /// User side: the previous package's results of this hand-over are applied.
    /// Hold no slice from [`entries`](Self::entries) across this call.
    pub fn mark_prev_applied(&self) {
        let seq = self.header().seq;
        let p = self.hdr_field(std::mem::offset_of!(CompletedWorkList, prev_applied));
        // SAFETY: inside the header; the send thread's up-call is the only user.
        unsafe { std::ptr::write_volatile(p, seq) };
    }

    /// User side: entry `i` is applied (its numbers become zero, so handing it
    /// again applies nothing). Hold no slice from `entries` across this call.
    pub fn mark_applied(&self, i: usize) {
        if i >= self.header().count as usize {
            return;
        }
        // SAFETY: i < count ≤ capacity: inside the region; no reference to the
        // entry is alive (see above).
        unsafe {
            let e = self.entries_ptr().add(i);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*e).bytes), 0);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*e).fc_data), 0);
        }
    }

    /// User side: everything of this hand-over is applied.
    pub fn acknowledge(&self) {
        let seq = self.header().seq;
        let p = self.hdr_field(std::mem::offset_of!(CompletedWorkList, acked));
        // SAFETY: as in `mark_prev_applied`.
        unsafe { std::ptr::write_volatile(p, seq) };
    }

    /// Empties the list (cost proportional to its entries, not to 64 K nodes).
    pub fn clear(&mut self) {
        // By index, without collecting: this runs in every send iteration.
        for i in 0..self.entries().len() {
            let n = self.entries()[i].node_id;
            self.slot_of[n as usize] = NO_SLOT;
        }
        self.header_mut().count = 0;
    }
}

/// The incoming ring buffer the receive thread fills and the user consumes.
pub struct IncomingRing {
    region: Region,
    mask: u32,
}

impl std::fmt::Debug for IncomingRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IncomingRing({:?})", self.header())
    }
}

impl IncomingRing {
    /// A ring of `size` entries (a power of two).
    pub fn new(size: u32) -> Result<Self, FabricError> {
        if !size.is_power_of_two() {
            return Err(FabricError::InvalidArgument(format!("incoming ring size {size} is not a power of two")));
        }
        let bytes = std::mem::size_of::<IncomingRingHeader>() + size as usize * std::mem::size_of::<IncomingEntry>();
        let region = Region::new(bytes)?;
        let mut r = IncomingRing { region, mask: size - 1 };
        r.header_mut().size = size;
        Ok(r)
    }

    fn header_mut(&mut self) -> &mut IncomingRingHeader {
        // SAFETY: the region starts with the header (zeroed = valid) and is owned by `self`.
        unsafe { &mut *(self.region.ptr() as *mut IncomingRingHeader) }
    }

    /// The header.
    pub fn header(&self) -> &IncomingRingHeader {
        // SAFETY: as in `header_mut`.
        unsafe { &*(self.region.ptr() as *const IncomingRingHeader) }
    }

    fn slot(&self, i: u32) -> *mut IncomingEntry {
        // SAFETY: entries follow the 16-byte header; `i & mask` < size.
        unsafe {
            (self.region.ptr().add(std::mem::size_of::<IncomingRingHeader>()) as *mut IncomingEntry)
                .add((i & self.mask) as usize)
        }
    }

    /// Address of the header (for Java).
    pub fn address(&self) -> *const u8 {
        self.region.ptr()
    }

    /// Valid entries.
    pub fn used(&self) -> u32 {
        self.header().used
    }

    /// Free slots.
    pub fn free(&self) -> u32 {
        self.mask + 1 - self.used()
    }

    /// Appends an entry; false if full.
    pub fn push(&mut self, e: IncomingEntry) -> bool {
        if self.free() == 0 {
            return false;
        }
        let back = self.header().back;
        // SAFETY: slot index is masked into the ring.
        unsafe { *self.slot(back) = e };
        let h = self.header_mut();
        h.back = (back + 1) & (h.size - 1);
        h.used += 1;
        true
    }

    /// The `i`-th valid entry from the front.
    pub fn get(&self, i: u32) -> Option<IncomingEntry> {
        // SAFETY: the slot is inside the ring; valid entries were written by push.
        (i < self.used()).then(|| unsafe { *self.slot(self.header().front + i) })
    }

    /// Drops `n` entries from the front (clamped to `used`); returns how many.
    pub fn consume(&mut self, n: u32) -> u32 {
        let n = n.min(self.used());
        let h = self.header_mut();
        h.front = (h.front + n) & (h.size - 1);
        h.used -= n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_list_sums_per_node_and_clears() {
        let mut l = CompletedList::new(2).unwrap();
        assert!(l.add(7, 70, 100, 1));
        assert!(l.add(9, 90, 5, 0));
        assert!(l.add(7, 70, 50, 2));
        assert!(!l.add(3, 30, 1, 0), "full: capacity 2");
        assert_eq!(
            l.entries(),
            [
                CompletedWork { node_id: 7, fc_data: 3, bytes: 150, connection: 70 },
                CompletedWork { node_id: 9, fc_data: 0, bytes: 5, connection: 90 }
            ]
        );
        // A newer connection of node 7: the old one's numbers are dropped.
        assert!(l.add(7, 71, 8, 0));
        assert_eq!(l.entries()[0], CompletedWork { node_id: 7, fc_data: 0, bytes: 8, connection: 71 });
        l.clear();
        assert!(l.is_empty());
        assert!(l.add(3, 30, 1, 0));
        assert_eq!(l.entries().len(), 1);
    }

    #[test]
    fn incoming_ring_wraps_and_consumes_in_order() {
        let mut r = IncomingRing::new(4).unwrap();
        let e = |n: u32| IncomingEntry { buffer_id: n, ..Default::default() };
        for round in 0..5u32 {
            for i in 0..3 {
                assert!(r.push(e(round * 10 + i)));
            }
            assert_eq!(r.get(0).unwrap().buffer_id, round * 10);
            assert_eq!(r.consume(2), 2);
            assert_eq!(r.get(0).unwrap().buffer_id, round * 10 + 2);
            assert_eq!(r.consume(9), 1);
            assert_eq!(r.used(), 0);
        }
        for i in 0..4 {
            assert!(r.push(e(i)));
        }
        assert!(!r.push(e(9)), "full");
        assert_eq!(r.header().size, 4);
    }

    #[test]
    fn ring_size_must_be_a_power_of_two() {
        assert!(IncomingRing::new(6).is_err());
    }
}
