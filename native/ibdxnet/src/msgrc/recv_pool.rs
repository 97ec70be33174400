//! The receive buffer pool: equal-size buffers in registered slabs. The
//! first slab is registered at start; the receive thread registers more as
//! free buffers run short ([`RecvPool::grow`], up to the configured count)
//! and gives back a slab none of whose buffers has been in use for a while
//! ([`RecvPool::retire`], never the first). Buffer ids are stable: id =
//! slab × buffers per slab + index. The receive thread takes buffers to post
//! on the SRQ (from the lowest slab that has one, so higher slabs drain and
//! can be retired); the user returns them from any thread once processed
//! (lock-free: one free list per slab).
//!
//! `take`, `grow` and `retire` are for one thread (the receive thread):
//! a slab regrown while another taker still held one of its old ids popped
//! would hand that id out twice. `give_back`, `address`, `sge` and the
//! figures are for any thread.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::fabric::{Fabric, FabricError, MemoryRegion, Sge};
use crate::sys::doorbell::Doorbell;
use crate::sys::queue::IndexQueue;
use crate::sys::region::Region;
use crate::util::lock;

const FREE: u8 = 0;
const IN_USE: u8 = 1;
/// The buffer's slab is not registered.
const ABSENT: u8 = 2;

/// Why a returned buffer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReturnError {
    /// No such buffer id.
    Unknown(u32),
    /// The buffer is already in the pool (returned twice).
    NotInUse(u32),
}

impl std::fmt::Display for ReturnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReturnError::Unknown(id) => write!(f, "receive buffer {id} does not exist"),
            ReturnError::NotInUse(id) => write!(f, "receive buffer {id} was returned twice"),
        }
    }
}

/// A slab's memory. Field order = drop order: deregister before freeing.
struct SlabMem<F: Fabric> {
    _mr: F::Mr,
    _region: Region,
}

/// One slab: where it is (0: not registered), its key, its free buffers.
struct Slab<F: Fabric> {
    base: AtomicU64,
    lkey: AtomicU32,
    free: IndexQueue,
    mem: Mutex<Option<SlabMem<F>>>,
}

/// The pool.
pub struct RecvPool<F: Fabric> {
    slabs: Box<[Slab<F>]>,
    slab_buffers: u32,
    buffer_size: u32,
    count: u32,
    state: Box<[AtomicU8]>,
    /// Slabs registered now.
    present: AtomicU32,
    /// Buffers the receive thread has posted on the SRQ (it keeps this).
    posted: AtomicU32,
    /// The receive thread's doorbell: a returned buffer may be what it waits for.
    doorbell: OnceLock<Arc<Doorbell>>,
}

impl<F: Fabric> std::fmt::Debug for RecvPool<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RecvPool({} × {} B in slabs of {}, {} slabs registered, {} free)",
            self.count,
            self.buffer_size,
            self.slab_buffers,
            self.present.load(Ordering::Relaxed),
            self.available()
        )
    }
}

impl<F: Fabric> RecvPool<F> {
    /// Allocates and registers `count` buffers of `buffer_size` bytes at
    /// once (one slab: the pool never grows or shrinks).
    pub fn new(fabric: &F, count: u32, buffer_size: u32) -> Result<Self, FabricError> {
        Self::with_slabs(fabric, count, buffer_size, count)
    }

    /// Up to `count` buffers of `buffer_size` bytes in slabs of
    /// `slab_buffers` (at least 1, at most `count`); registers the first.
    pub fn with_slabs(fabric: &F, count: u32, buffer_size: u32, slab_buffers: u32) -> Result<Self, FabricError> {
        let slab_buffers = slab_buffers.clamp(1, count.max(1));
        let n = count.div_ceil(slab_buffers);
        let slabs = (0..n)
            .map(|s| {
                let len = (count - s * slab_buffers).min(slab_buffers);
                // Twice the buffers: a push rarely meets a slot a pop still holds.
                Slab {
                    base: AtomicU64::new(0),
                    lkey: AtomicU32::new(0),
                    free: IndexQueue::new(len as usize * 2),
                    mem: Mutex::new(None),
                }
            })
            .collect();
        let state = (0..count).map(|_| AtomicU8::new(ABSENT)).collect();
        let pool = RecvPool {
            slabs,
            slab_buffers,
            buffer_size,
            count,
            state,
            present: AtomicU32::new(0),
            posted: AtomicU32::new(0),
            doorbell: OnceLock::new(),
        };
        if n > 0 {
            pool.register(fabric, 0)?;
        }
        Ok(pool)
    }

    fn slab_len(&self, s: u32) -> u32 {
        (self.count - s * self.slab_buffers).min(self.slab_buffers)
    }

    fn register(&self, fabric: &F, s: u32) -> Result<(), FabricError> {
        let slab = &self.slabs[s as usize];
        let mut mem = lock(&slab.mem);
        if mem.is_some() {
            return Ok(());
        }
        let len = self.slab_len(s) as usize * self.buffer_size as usize;
        let region = Region::new(len)?;
        // SAFETY: `region` lives in the slab's `SlabMem` beside `mr`, which
        // is dropped first (field order).
        let mr = unsafe { fabric.register(region.ptr(), len) }?;
        slab.lkey.store(mr.lkey(), Ordering::Relaxed);
        slab.base.store(region.ptr() as u64, Ordering::Release);
        *mem = Some(SlabMem { _mr: mr, _region: region });
        let first = s * self.slab_buffers;
        for id in first..first + self.slab_len(s) {
            self.state[id as usize].store(FREE, Ordering::Release);
            slab.free.push(id).expect("queue sized for every buffer of its slab");
        }
        self.present.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Receive thread: registers the lowest slab not registered. False if
    /// every slab is registered.
    pub fn grow(&self, fabric: &F) -> Result<bool, FabricError> {
        let Some(s) = (0..self.slabs.len()).find(|&s| self.slabs[s].base.load(Ordering::Acquire) == 0) else {
            return Ok(false);
        };
        self.register(fabric, s as u32)?;
        Ok(true)
    }

    /// True if slab `s` is registered and none of its buffers is in use
    /// (taken and not given back).
    pub fn slab_unused(&self, s: u32) -> bool {
        let Some(slab) = self.slabs.get(s as usize) else { return false };
        slab.base.load(Ordering::Acquire) != 0 && slab.free.len() == self.slab_len(s) as usize
    }

    /// Receive thread: deregisters and frees slab `s` (never the first) if
    /// none of its buffers is in use; true if it did.
    pub fn retire(&self, s: u32) -> bool {
        if s == 0 || !self.slab_unused(s) {
            return false;
        }
        let first = s * self.slab_buffers;
        let ids = first..first + self.slab_len(s);
        for id in ids.clone() {
            if self.state[id as usize].compare_exchange(FREE, ABSENT, Ordering::AcqRel, Ordering::Acquire).is_err() {
                // Taken meanwhile (another taker): undo, keep the slab.
                for back in first..id {
                    self.state[back as usize].store(FREE, Ordering::Release);
                }
                return false;
            }
        }
        // Every buffer is ABSENT now: `give_back` refuses them, `take` skips them.
        let slab = &self.slabs[s as usize];
        slab.base.store(0, Ordering::Release);
        while slab.free.pop().is_some() {}
        let mem = lock(&slab.mem).take();
        drop(mem);
        self.present.fetch_sub(1, Ordering::AcqRel);
        true
    }

    /// Bytes per buffer.
    pub fn buffer_size(&self) -> u32 {
        self.buffer_size
    }

    /// Number of buffers (the most the pool grows to).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Number of slabs (registered or not).
    pub fn slab_count(&self) -> u32 {
        self.slabs.len() as u32
    }

    /// Buffers per slab.
    pub fn slab_buffers(&self) -> u32 {
        self.slab_buffers
    }

    /// Slabs registered now.
    pub fn slabs_registered(&self) -> u32 {
        self.present.load(Ordering::Acquire)
    }

    /// Buffers in registered slabs.
    pub fn registered_buffers(&self) -> u32 {
        (0..self.slab_count())
            .filter(|&s| self.slabs[s as usize].base.load(Ordering::Acquire) != 0)
            .map(|s| self.slab_len(s))
            .sum()
    }

    /// Bytes registered now.
    pub fn registered_bytes(&self) -> u64 {
        u64::from(self.registered_buffers()) * u64::from(self.buffer_size)
    }

    /// Bytes of the pool's own bookkeeping (states and free lists).
    pub fn bookkeeping_bytes(&self) -> u64 {
        u64::from(self.count) * (1 + 2 * 4) + self.slabs.len() as u64 * std::mem::size_of::<Slab<F>>() as u64
    }

    /// Buffers currently in the pool.
    pub fn available(&self) -> usize {
        self.slabs.iter().map(|s| s.free.len()).sum()
    }

    /// Buffers the receive thread has posted on the SRQ.
    pub fn posted(&self) -> u32 {
        self.posted.load(Ordering::Relaxed)
    }

    /// Receive thread: how many buffers it has posted now.
    pub(crate) fn set_posted(&self, n: u32) {
        self.posted.store(n, Ordering::Relaxed);
    }

    /// Receive thread: takes a free buffer, from the lowest slab that has one.
    pub fn take(&self) -> Option<u32> {
        for slab in self.slabs.iter() {
            if slab.base.load(Ordering::Acquire) == 0 {
                continue;
            }
            while let Some(id) = slab.free.pop() {
                if self.state[id as usize].compare_exchange(FREE, IN_USE, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    return Some(id);
                }
                // Its slab is being retired: the id is gone with it.
            }
        }
        None
    }

    /// Returns a buffer; any thread. Unknown ids and double returns are refused.
    pub fn give_back(&self, id: u32) -> Result<(), ReturnError> {
        let st = self.state.get(id as usize).ok_or(ReturnError::Unknown(id))?;
        st.compare_exchange(IN_USE, FREE, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| ReturnError::NotInUse(id))?;
        // The slab stays registered: `retire` needs every buffer FREE, and
        // this one was in use until the exchange above.
        let free = &self.slabs[(id / self.slab_buffers) as usize].free;
        // The queue has room for every buffer, yet a push can find the next
        // slot still held by a pop in progress on another thread (the queue
        // is transiently full); that pop finishes in a few instructions.
        while free.push(id).is_err() {
            std::thread::yield_now();
        }
        if let Some(d) = self.doorbell.get() {
            d.wake_if_sleeping();
        }
        Ok(())
    }

    /// Rings `doorbell` (if its thread sleeps) whenever a buffer comes back.
    pub(crate) fn wake_on_return(&self, doorbell: Arc<Doorbell>) {
        // Set once, by the engine that owns the pool; a second call changes nothing.
        let _ = self.doorbell.set(doorbell);
    }

    /// Address of buffer `id` (which is in use: its slab is registered).
    pub fn address(&self, id: u32) -> u64 {
        let slab = &self.slabs[(id / self.slab_buffers) as usize];
        slab.base.load(Ordering::Acquire) + u64::from(id % self.slab_buffers) * u64::from(self.buffer_size)
    }

    /// An SGE covering buffer `id` (which is in use).
    pub fn sge(&self, id: u32) -> Sge {
        let slab = &self.slabs[(id / self.slab_buffers) as usize];
        Sge { addr: self.address(id), length: self.buffer_size, lkey: slab.lkey.load(Ordering::Relaxed) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::sim::{SimFabric, SimNetwork};
    use crate::fabric::{FabricConfig, SimOptions};
    use std::sync::Arc;

    fn pool(count: u32) -> RecvPool<SimFabric> {
        let cfg = FabricConfig {
            sim: SimOptions { network: Some(SimNetwork::new()), ..Default::default() },
            ..Default::default()
        };
        RecvPool::new(&SimFabric::open(&cfg).unwrap(), count, 256).unwrap()
    }

    fn fabric() -> SimFabric {
        let cfg = FabricConfig {
            sim: SimOptions { network: Some(SimNetwork::new()), ..Default::default() },
            ..Default::default()
        };
        SimFabric::open(&cfg).unwrap()
    }

    #[test]
    fn slabs_grow_on_demand_keep_their_ids_and_only_unused_ones_retire() {
        let f = fabric();
        // 10 buffers in slabs of 4: 4 + 4 + 2.
        let p = RecvPool::with_slabs(&f, 10, 256, 4).unwrap();
        assert_eq!((p.slab_count(), p.slabs_registered(), p.registered_bytes()), (3, 1, 4 * 256));
        let a: Vec<u32> = (0..4).map(|_| p.take().unwrap()).collect();
        assert_eq!(p.take(), None, "only the first slab is registered");
        assert!(p.grow(&f).unwrap());
        assert!(p.grow(&f).unwrap());
        assert!(!p.grow(&f).unwrap(), "every slab is registered");
        assert_eq!((p.slabs_registered(), p.registered_bytes(), p.available()), (3, 10 * 256, 6));
        let b: Vec<u32> = (0..6).map(|_| p.take().unwrap()).collect();
        let mut ids: Vec<u32> = a.iter().chain(&b).copied().collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..10).collect::<Vec<_>>());
        // Addresses are distinct within a slab and buffer-sized apart.
        assert_eq!(p.address(5) - p.address(4), 256);
        assert_eq!(p.sge(9).length, 256);
        assert!(!p.retire(1), "slab 1 is in use");
        for id in 4..8 {
            p.give_back(id).unwrap();
        }
        assert!(!p.retire(0), "never the first slab");
        assert!(p.retire(1));
        assert_eq!((p.slabs_registered(), p.registered_bytes(), p.available()), (2, 6 * 256, 0));
        assert_eq!(p.give_back(5), Err(ReturnError::NotInUse(5)), "a retired buffer is not in use");
        // Taking prefers the lowest slab; the regrown slab gets the same ids.
        p.give_back(9).unwrap();
        p.give_back(0).unwrap();
        assert_eq!(p.take(), Some(0));
        assert!(p.grow(&f).unwrap());
        assert_eq!(p.take(), Some(4), "the lowest slab with a free buffer");
        assert_eq!(p.slabs_registered(), 3);
    }

    /// Stress: the receive thread's part (take, grow, retire) on one thread,
    /// returns from three others. Retiring a slab whose buffers are being
    /// returned must never lose, duplicate or free a buffer in use: every
    /// buffer taken is marked held, and a buffer handed out twice or
    /// refused on return fails the test.
    #[test]
    fn returns_race_slab_retirement_safely() {
        let f = fabric();
        let p = Arc::new(RecvPool::with_slabs(&f, 64, 64, 8).unwrap());
        let rounds = if cfg!(miri) { 200 } else { 300_000 };
        let held: Arc<Vec<AtomicU8>> = Arc::new((0..64).map(|_| AtomicU8::new(0)).collect());
        let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(16);
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let returners: Vec<_> = (0..3)
            .map(|_| {
                let (p, rx, held) = (p.clone(), rx.clone(), held.clone());
                std::thread::spawn(move || loop {
                    let id = match rx.lock().unwrap().recv() {
                        Ok(id) => id,
                        Err(_) => return,
                    };
                    assert_eq!(held[id as usize].swap(0, Ordering::AcqRel), 1, "buffer {id} returned but not held");
                    let at = p.address(id);
                    assert_ne!(at, 0, "buffer {id} in use but its slab is gone");
                    // SAFETY: `id` is held by this thread (taken, not yet
                    // returned), so its slab is registered and mapped; a slab
                    // freed under it would fault here.
                    unsafe { std::ptr::write_volatile(at as *mut u8, id as u8) };
                    p.give_back(id).unwrap();
                })
            })
            .collect();
        let (mut retired, mut grown) = (0u64, 0u64);
        for r in 0..rounds {
            let id = loop {
                if let Some(id) = p.take() {
                    break id;
                }
                if p.grow(&f).unwrap() {
                    grown += 1;
                }
                std::thread::yield_now();
            };
            assert_eq!(held[id as usize].swap(1, Ordering::AcqRel), 0, "buffer {id} handed out twice");
            assert_ne!(p.address(id), 0);
            tx.send(id).unwrap();
            if r % 7 == 0 {
                for s in 1..p.slab_count() {
                    if p.retire(s) {
                        retired += 1;
                    }
                }
            }
            if r % 5 == 0 && p.grow(&f).unwrap() {
                grown += 1;
            }
        }
        drop(tx);
        for r in returners {
            r.join().unwrap();
        }
        assert!(retired > 0 && grown > 0, "retired {retired}, grown {grown}");
        assert_eq!(p.available() as u32, p.registered_buffers(), "every buffer came back exactly once");
    }

    #[test]
    fn buffers_are_distinct_and_returns_are_checked() {
        let p = pool(4);
        let ids: Vec<u32> = (0..4).map(|_| p.take().unwrap()).collect();
        assert_eq!(p.take(), None);
        let mut addrs: Vec<u64> = ids.iter().map(|&i| p.address(i)).collect();
        addrs.sort_unstable();
        assert!(addrs.windows(2).all(|w| w[1] - w[0] == 256));
        assert_eq!(p.give_back(ids[0]), Ok(()));
        assert_eq!(p.give_back(ids[0]), Err(ReturnError::NotInUse(ids[0])));
        assert_eq!(p.give_back(99), Err(ReturnError::Unknown(99)));
        assert_eq!(p.available(), 1);
    }

    /// Stress: one taker, three returners. A buffer handed out twice would be
    /// returned twice, which `give_back` refuses (and the test unwraps).
    #[test]
    fn concurrent_returns_never_duplicate_buffers() {
        let p = Arc::new(pool(64));
        let rounds = if cfg!(miri) { 100 } else { 200_000 };
        let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(64);
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let returners: Vec<_> = (0..3)
            .map(|_| {
                let (p, rx) = (p.clone(), rx.clone());
                std::thread::spawn(move || loop {
                    let id = match rx.lock().unwrap().recv() {
                        Ok(id) => id,
                        Err(_) => return,
                    };
                    p.give_back(id).unwrap();
                })
            })
            .collect();
        for _ in 0..rounds {
            let id = loop {
                if let Some(id) = p.take() {
                    break id;
                }
                std::thread::yield_now();
            };
            tx.send(id).unwrap();
        }
        drop(tx);
        for r in returners {
            r.join().unwrap();
        }
        assert_eq!(p.available(), 64, "every buffer came back exactly once");
    }
}
