//! The counters table Java reads in place (`io.ibdxnet.ib.NativeCounters`):
//! one [`CounterSlot`] per counter, each on its own cache line so the engine
//! threads that write neighbouring counters do not share a line, and the
//! descriptor that tells Java how many slots there are, how far apart, and
//! each slot's name, kind and meaning (lines the `layouts` native appends
//! to [`super::table_text`]).
//!
//! The slots themselves are declared by their owner (`msgrc::stats`, which
//! describes every counter once); this module fixes their shape and the
//! descriptor's format.

pub use crate::sys::counter::{CounterSlot, COUNTER_STRIDE};

/// What a slot's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterKind {
    /// Only grows (events since the engine started).
    Counter,
    /// A current level, may go down.
    Gauge,
}

impl CounterKind {
    /// Its word in the descriptor.
    pub fn word(self) -> &'static str {
        match self {
            CounterKind::Counter => "counter",
            CounterKind::Gauge => "gauge",
        }
    }
}

/// One slot of the table as the descriptor describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotDesc {
    /// Name (a key of the statistics map).
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: CounterKind,
    /// One line: what it counts.
    pub doc: &'static str,
}

/// The descriptor as lines of [`super::table_text`]: first
/// `counters <count> <stride> <value offset>`, then one
/// `counter <index> <name> <kind> <doc>` per slot, in slot order (the doc is
/// the rest of the line).
pub fn descriptor_text(slots: &[SlotDesc]) -> String {
    let mut s = format!("counters {} {} {}\n", slots.len(), COUNTER_STRIDE, std::mem::offset_of!(CounterSlot, value));
    for (i, d) in slots.iter().enumerate() {
        debug_assert!(!d.name.contains(char::is_whitespace) && !d.doc.contains('\n'));
        s += &format!("counter {i} {} {} {}\n", d.name, d.kind.word(), d.doc);
    }
    s
}
