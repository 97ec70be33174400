//! The receive buffer pool: equal-size buffers carved from one registered
//! region. The receive thread takes buffers to post on the SRQ; the user
//! returns them from any thread once processed (lock-free free list).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use crate::fabric::{Fabric, FabricError, MemoryRegion, Sge};
use crate::sys::doorbell::Doorbell;
use crate::sys::queue::IndexQueue;
use crate::sys::region::Region;

const FREE: u8 = 0;
const IN_USE: u8 = 1;

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

/// The pool. Field order = drop order: deregister before freeing.
pub struct RecvPool<F: Fabric> {
    mr: F::Mr,
    region: Region,
    buffer_size: u32,
    count: u32,
    state: Box<[AtomicU8]>,
    free: IndexQueue,
    /// The receive thread's doorbell: a returned buffer may be what it waits for.
    doorbell: OnceLock<Arc<Doorbell>>,
}

impl<F: Fabric> std::fmt::Debug for RecvPool<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecvPool({} × {} B, {} free)", self.count, self.buffer_size, self.free.len())
    }
}

impl<F: Fabric> RecvPool<F> {
    /// Allocates and registers `count` buffers of `buffer_size` bytes.
    pub fn new(fabric: &F, count: u32, buffer_size: u32) -> Result<Self, FabricError> {
        let len = count as usize * buffer_size as usize;
        let region = Region::new(len)?;
        // SAFETY: `region` lives as long as the pool and is dropped after `mr`.
        let mr = unsafe { fabric.register(region.ptr(), len) }?;
        // Twice the buffers: a push rarely meets a slot a pop still holds.
        let free = IndexQueue::new(count as usize * 2);
        for id in 0..count {
            free.push(id).expect("queue sized for every buffer");
        }
        let state = (0..count).map(|_| AtomicU8::new(FREE)).collect();
        Ok(RecvPool { mr, region, buffer_size, count, state, free, doorbell: OnceLock::new() })
    }

    /// Bytes per buffer.
    pub fn buffer_size(&self) -> u32 {
        self.buffer_size
    }

    /// Number of buffers.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Buffers currently in the pool.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Takes a free buffer.
    pub fn take(&self) -> Option<u32> {
        let id = self.free.pop()?;
        self.state[id as usize].store(IN_USE, Ordering::Release);
        Some(id)
    }

    /// Returns a buffer; any thread. Unknown ids and double returns are refused.
    pub fn give_back(&self, id: u32) -> Result<(), ReturnError> {
        let st = self.state.get(id as usize).ok_or(ReturnError::Unknown(id))?;
        st.compare_exchange(IN_USE, FREE, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| ReturnError::NotInUse(id))?;
        // The queue has room for every buffer, yet a push can find the next
        // slot still held by a pop in progress on another thread (the queue
        // is transiently full); that pop finishes in a few instructions.
        while self.free.push(id).is_err() {
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

    /// Address of buffer `id`.
    pub fn address(&self, id: u32) -> u64 {
        self.region.ptr() as u64 + u64::from(id) * u64::from(self.buffer_size)
    }

    /// An SGE covering buffer `id`.
    pub fn sge(&self, id: u32) -> Sge {
        Sge { addr: self.address(id), length: self.buffer_size, lkey: self.mr.lkey() }
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
