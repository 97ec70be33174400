//! What Java's engine handle points to: the slot that outlives the engine,
//! the leases native calls hold on it, and the connections Java holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use jni::sys::jlong;

use super::super::handler::JniHandler;
use super::super::Throw;
use crate::con::Connection;
use crate::fabric::sim::SimFabric;
use crate::fabric::simhost::SimHostFabric;
use crate::fabric::verbs::VerbsFabric;
use crate::fabric::Fabric;
use crate::msgrc::{Engine, EngineStats};

/// An engine on either fabric, with the connections Java holds handles to
/// (their send rings must stay alive while Java writes into them).
pub(super) struct Native<F: Fabric> {
    pub(super) engine: Engine<F>,
    pub(super) conns: Mutex<Handles<F>>,
    pub(super) handler: Arc<JniHandler>,
}

/// Java's handles, per connection (not per node: a node's old connection
/// stays alive until Java releases it, while a new one is already in use),
/// counted: each `connect` that returned a connection is one handle, each
/// `releaseConnection` returns one — two Java objects wrapping the same
/// connection each keep its ring alive until they are released.
pub(super) struct Handles<F: Fabric> {
    /// By local QPN (the connection id Java knows): the connection and how
    /// many handles Java holds on it.
    pub(super) by_qpn: HashMap<u32, (Arc<Connection<F>>, u32)>,
    /// The connection `connect` last returned per node.
    pub(super) latest: HashMap<u16, u32>,
}

impl<F: Fabric> Handles<F> {
    pub(super) fn new() -> Self {
        Handles { by_qpn: HashMap::new(), latest: HashMap::new() }
    }

    pub(super) fn acquire(&mut self, c: Arc<Connection<F>>) {
        let qpn = c.local_qpn();
        self.latest.insert(c.node().0, qpn);
        self.by_qpn.entry(qpn).or_insert((c, 0)).1 += 1;
    }

    pub(super) fn release(&mut self, qpn: u32) {
        let Some((c, count)) = self.by_qpn.get_mut(&qpn) else { return };
        *count -= 1;
        if *count == 0 {
            let node = c.node().0;
            self.by_qpn.remove(&qpn);
            if self.latest.get(&node) == Some(&qpn) {
                self.latest.remove(&node);
            }
        }
    }
}

pub(super) enum AnyEngine {
    Sim(Native<SimFabric>),
    Verbs(Native<VerbsFabric>),
    SimHost(Native<SimHostFabric>),
}

/// What Java's engine handle points to. It is never freed (a few bytes per
/// engine ever created), so a native call that races `destroy` always finds a
/// valid slot: it takes a lease (one atomic add) before it touches the engine,
/// and `destroy` closes the slot, waits until the leases drain and only then
/// shuts the engine down and frees it. A call after that is refused with
/// `EngineClosedException`, never a use after free.
///
/// The slot also keeps the engine's statistics, whose first fields are the
/// counters table Java reads in place (`NativeCounters`, at
/// `countersAddress`): never freed with it, so a read after `destroy` (or
/// racing it) loads the last values from live memory. That keeps the
/// statistics (`EngineStats`, a few KiB with the timers' histograms) of
/// every engine ever created. The send thread's sleeping word, which Java
/// reads in place before `sendFromCaller`, is kept the same way (4 bytes),
/// so a read racing `destroy` loads live memory too.
pub(super) struct Slot {
    /// [`CLOSED`] | number of leases held.
    pub(super) state: AtomicU64,
    /// The engine; null once `destroy` took it (after [`CLOSED`] was set and
    /// the leases drained).
    pub(super) engine: AtomicPtr<AnyEngine>,
    /// The engine's statistics; outlives the engine (see above).
    pub(super) stats: Arc<EngineStats>,
    /// The send thread's sleeping word (`abi::SleepWord`); outlives the engine.
    pub(super) send_sleep_word: Arc<std::sync::atomic::AtomicU32>,
}

/// In [`Slot::state`]: no new lease is granted.
pub(super) const CLOSED: u64 = 1 << 63;

/// A native call's right to use the engine until it is dropped.
pub(super) struct Lease {
    pub(super) slot: &'static Slot,
    pub(super) engine: &'static AnyEngine,
}

impl std::ops::Deref for Lease {
    type Target = AnyEngine;
    fn deref(&self) -> &AnyEngine {
        self.engine
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Release: everything this call did with the engine happens before
        // `destroy` sees the count drop (its Acquire load).
        self.slot.state.fetch_sub(1, Ordering::Release);
    }
}

pub(super) fn closed() -> Throw {
    Throw { class: "io/ibdxnet/ib/EngineClosedException", msg: "engine is closed".into() }
}

pub(super) fn slot(handle: jlong) -> Result<&'static Slot, Throw> {
    if handle == 0 {
        return Err(closed());
    }
    // SAFETY: non-zero handles come from `create` (a leaked `Box<Slot>`), and
    // a slot is never freed: it stays valid for the life of the process.
    Ok(unsafe { &*(handle as *const Slot) })
}

pub(super) fn engine(handle: jlong) -> Result<Lease, Throw> {
    let slot = slot(handle)?;
    // One read-modify-write on the slot's word: either it precedes `destroy`'s
    // closing (and `destroy` waits for us) or it sees CLOSED (and we back off
    // without touching the engine).
    if slot.state.fetch_add(1, Ordering::Acquire) & CLOSED != 0 {
        slot.state.fetch_sub(1, Ordering::Release);
        return Err(closed());
    }
    let p = slot.engine.load(Ordering::Acquire);
    // SAFETY: we hold a lease granted before CLOSED was set, so `destroy` has
    // not taken the engine and will not before the lease is dropped; `create`
    // stored a valid `Box<AnyEngine>` pointer before publishing the handle.
    Ok(Lease { slot, engine: unsafe { &*p } })
}
