//! A counter on its own cache line ([`CounterSlot`]), and [`Part`]: a
//! group of counters that lives inside a larger table owned elsewhere (the
//! connection manager's and the authentication layer's counters live in the
//! engine's counters table, `msgrc::stats`, which Java reads in place).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Bytes from one slot to the next: a cache line.
pub const COUNTER_STRIDE: usize = 64;

/// One counter: a 64-bit value alone on its cache line, so threads writing
/// neighbouring counters do not share a line. Written with relaxed (counts)
/// or release (gauges) stores.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct CounterSlot {
    /// The value (offset 0 of the slot).
    pub value: AtomicU64,
}

impl std::ops::Deref for CounterSlot {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.value
    }
}

const _: () = assert!(std::mem::size_of::<CounterSlot>() == COUNTER_STRIDE);
const _: () = assert!(std::mem::align_of::<CounterSlot>() == COUNTER_STRIDE);
const _: () = assert!(std::mem::offset_of!(CounterSlot, value) == 0);

/// One counter of a group of slots `S` (the connection manager's, the
/// authentication layer's): its name in the statistics map and the shared
/// table's descriptor, what it counts, and its slot in an `S`.
pub struct CounterDesc<S: 'static> {
    /// Key in the statistics map.
    pub name: &'static str,
    /// What it counts (one line).
    pub doc: &'static str,
    /// Its slot in an `S`.
    pub get: fn(&S) -> &CounterSlot,
}

/// `counter_desc!(name, field, "doc")`: the [`CounterDesc`] of `field`,
/// named `name` in the statistics map.
macro_rules! counter_desc {
    ($name:ident, $field:ident, $doc:literal) => {
        $crate::sys::counter::CounterDesc { name: stringify!($name), doc: $doc, get: |s| &s.$field }
    };
}
pub(crate) use counter_desc;

/// Something that holds a `T` for as long as it lives.
pub trait Holds<T>: Send + Sync {
    /// The `T` it holds.
    fn part(&self) -> &T;
}

/// A `T` that is a part of a shared owner (or stands alone): dereferences to
/// it and keeps the owner alive.
pub struct Part<T: 'static> {
    owner: Arc<dyn Holds<T>>,
}

struct Alone<T>(T);

impl<T: Send + Sync> Holds<T> for Alone<T> {
    fn part(&self) -> &T {
        &self.0
    }
}

impl<T: Send + Sync + 'static> Part<T> {
    /// `value` on its own.
    pub fn alone(value: T) -> Self {
        Part { owner: Arc::new(Alone(value)) }
    }

    /// The `T` that `owner` holds.
    pub fn of(owner: Arc<dyn Holds<T>>) -> Self {
        Part { owner }
    }
}

impl<T: Default + Send + Sync + 'static> Default for Part<T> {
    fn default() -> Self {
        Part::alone(T::default())
    }
}

impl<T> std::ops::Deref for Part<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.owner.part()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Part<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[derive(Default)]
    struct Table {
        a: CounterSlot,
        b: CounterSlot,
    }

    impl Holds<CounterSlot> for Table {
        fn part(&self) -> &CounterSlot {
            &self.b
        }
    }

    #[test]
    fn a_part_is_the_owners_field() {
        let t = Arc::new(Table::default());
        let p: Part<CounterSlot> = Part::of(t.clone());
        p.fetch_add(3, Ordering::Relaxed);
        assert_eq!(t.b.load(Ordering::Relaxed), 3);
        assert_eq!(t.a.load(Ordering::Relaxed), 0);
        let alone: Part<CounterSlot> = Part::default();
        alone.fetch_add(1, Ordering::Relaxed);
        assert_eq!(alone.load(Ordering::Relaxed), 1);
    }
}
