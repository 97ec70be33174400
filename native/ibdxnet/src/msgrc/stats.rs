//! The engine's statistics ([`EngineStats`]), shared by the engine and its
//! send and receive threads, described once: [`COUNTERS`] names each
//! counter and says what it counts, [`TIMERS`] each timed operation of the
//! engine threads, [`TIMER_FIGURES`] the figures of a timer. The statistics
//! map ([`super::Engine::stats_map`]), the print thread, the table in docs/operations.md
//! and the counters table Java reads in place (its descriptor,
//! [`descriptor_text`]) are all read from these tables.
//!
//! The counters are the slots of that table: [`EngineStats`] is
//! `#[repr(C)]` and starts with one [`CounterSlot`] (a cache line) per entry
//! of [`COUNTERS`], in that order, so Java reads counter `i` at
//! `address + i * COUNTER_STRIDE` (`io.ibdxnet.ib.NativeCounters`).

use std::sync::atomic::Ordering;

use super::timers::Timer;
use crate::abi::counters::{CounterKind, CounterSlot, SlotDesc, COUNTER_STRIDE};
use crate::con::auth::{AuthStats, AUTH_COUNTERS};
use crate::con::stats::CON_COUNTERS;
use crate::con::ConStats;
use crate::sys::counter::Holds;

/// Engine counters: first the shared table's slots (in the order of
/// [`COUNTERS`]), then the timers (not shared: see [`descriptor_text`]).
#[repr(C)]
#[derive(Debug, Default)]
pub struct EngineStats {
    /// Send WRs posted.
    pub wrs_sent: CounterSlot,
    /// Payload bytes posted.
    pub bytes_sent: CounterSlot,
    /// Payload bytes received.
    pub bytes_received: CounterSlot,
    /// Receive completions.
    pub messages_received: CounterSlot,
    /// Failed completions and polls.
    pub errors: CounterSlot,
    /// Threads that ended by a panic.
    pub thread_panics: CounterSlot,
    /// Messages whose immediate data named another node than the one of
    /// their queue pair (each closes that connection).
    pub protocol_violations: CounterSlot,
    /// Loop iterations of the send thread.
    pub send_iterations: CounterSlot,
    /// Times the send thread blocked until woken.
    pub send_sleeps: CounterSlot,
    /// Send iterations run on a user's thread (`Engine::send_from_caller`).
    pub send_caller_runs: CounterSlot,
    /// User's calls that left their data to the busy send thread.
    pub send_caller_left: CounterSlot,
    /// Loop iterations of the receive thread.
    pub recv_iterations: CounterSlot,
    /// Times the receive thread blocked until woken.
    pub recv_sleeps: CounterSlot,
    /// Receive buffers in the pool (set once at start).
    pub receive_buffers: CounterSlot,
    /// Receive iterations run on a waiting user's thread that found work.
    pub recv_caller_runs: CounterSlot,
    /// The connection manager's counters ([`CON_COUNTERS`]); its
    /// `ConManager::stats` is this part.
    pub con: ConStats,
    /// The authentication layer's counters ([`AUTH_COUNTERS`]).
    pub auth: AuthStats,
    /// The operation timers, by [`TimerId`] (each written by one thread).
    pub timers: [Timer; TIMER_COUNT],
}

impl EngineStats {
    pub(crate) fn add_sent(&self, wrs: u64, bytes: u64) {
        self.wrs_sent.fetch_add(wrs, Ordering::Relaxed);
        self.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
    }
    pub(crate) fn add_received(&self, bytes: u64) {
        self.messages_received.fetch_add(1, Ordering::Relaxed);
        self.bytes_received.fetch_add(bytes, Ordering::Relaxed);
    }
    /// The timer of `id`.
    pub fn timer(&self, id: TimerId) -> &Timer {
        &self.timers[id as usize]
    }
}

/// One counter of [`EngineStats`]: its name in the statistics map (and in
/// the shared table's descriptor), its kind and what it counts.
pub struct Counter {
    /// Key in the statistics map (the field's name).
    pub name: &'static str,
    /// Counter (only grows) or gauge.
    pub kind: CounterKind,
    /// What it counts.
    pub doc: &'static str,
    get: fn(&EngineStats) -> &CounterSlot,
}

impl Counter {
    /// Its value in `s`.
    pub fn value(&self, s: &EngineStats) -> u64 {
        (self.get)(s).load(Ordering::Relaxed)
    }

    /// Its slot in `s`.
    pub fn slot<'s>(&self, s: &'s EngineStats) -> &'s CounterSlot {
        (self.get)(s)
    }
}

macro_rules! counter {
    ($field:ident, $doc:literal) => {
        Counter { name: stringify!($field), kind: CounterKind::Counter, doc: $doc, get: |s| &s.$field }
    };
    (gauge $field:ident, $doc:literal) => {
        Counter { name: stringify!($field), kind: CounterKind::Gauge, doc: $doc, get: |s| &s.$field }
    };
}

/// Every counter of [`EngineStats`], in the order of the statistics map and
/// of the fields (slot `i` of the shared table is `COUNTERS[i]`).
#[rustfmt::skip]
pub static COUNTERS: &[Counter] = &[
    counter!(wrs_sent, "send work requests posted"),
    counter!(bytes_sent, "payload bytes posted"),
    counter!(bytes_received, "payload bytes received"),
    counter!(messages_received, "receive completions"),
    counter!(errors, "failed completions, polls and posts"),
    counter!(thread_panics, "engine threads that ended by a panic"),
    counter!(protocol_violations, "messages whose immediate data named another node than their queue pair's"),
    counter!(send_iterations, "loop iterations of the send thread"),
    counter!(send_sleeps, "times the send thread blocked until woken"),
    counter!(send_caller_runs, "send iterations run on a user's thread that found the send thread idle (it posted its own data)"),
    counter!(send_caller_left, "user's sends that found the send work under way and left their data to it"),
    counter!(recv_iterations, "loop iterations of the receive thread"),
    counter!(recv_sleeps, "times the receive thread blocked until woken"),
    counter!(gauge receive_buffers, "receive buffers in the pool (fixed at start)"),
    counter!(recv_caller_runs, "receive iterations run on a user's thread waiting for a response that found work (its response, or others' data)"),
];

impl Holds<ConStats> for EngineStats {
    fn part(&self) -> &ConStats {
        &self.con
    }
}

impl Holds<AuthStats> for EngineStats {
    fn part(&self) -> &AuthStats {
        &self.auth
    }
}

/// The shared table's slots in order: [`COUNTERS`], then the connection
/// manager's ([`CON_COUNTERS`]) and the authentication layer's
/// ([`AUTH_COUNTERS`]) counters, each with its slot in `s`.
pub fn table_slots(s: &EngineStats) -> Vec<(SlotDesc, &CounterSlot)> {
    let mut v: Vec<(SlotDesc, &CounterSlot)> =
        COUNTERS.iter().map(|c| (SlotDesc { name: c.name, kind: c.kind, doc: c.doc }, c.slot(s))).collect();
    let count = CounterKind::Counter;
    v.extend(CON_COUNTERS.iter().map(|c| (SlotDesc { name: c.name, kind: count, doc: c.doc }, (c.get)(&s.con))));
    v.extend(AUTH_COUNTERS.iter().map(|c| (SlotDesc { name: c.name, kind: count, doc: c.doc }, (c.get)(&s.auth))));
    v
}

/// True if `name` is a slot of the shared table.
pub fn in_table(name: &str) -> bool {
    COUNTERS.iter().any(|c| c.name == name)
        || CON_COUNTERS.iter().any(|c| c.name == name)
        || AUTH_COUNTERS.iter().any(|c| c.name == name)
}

/// The shared table's descriptor ([`crate::abi::counters::descriptor_text`]
/// of [`table_slots`]); Java reads it with the layouts, once. The timers are
/// not in the table: their percentiles are computed from a histogram when
/// read (no fixed value to load), so they stay on the statistics map.
pub fn descriptor_text() -> String {
    let s = EngineStats::default();
    let slots: Vec<SlotDesc> = table_slots(&s).into_iter().map(|(d, _)| d).collect();
    crate::abi::counters::descriptor_text(&slots)
}

/// The table's slots are the first fields of `EngineStats`, one cache line
/// each, before the timers.
const _: () = assert!(std::mem::offset_of!(EngineStats, timers) == TABLE_SLOTS * COUNTER_STRIDE);

/// Number of slots in the shared table (checked by a test against
/// [`table_slots`]).
pub const TABLE_SLOTS: usize = 15 + 20 + 7;

/// One timed operation: its name, the thread that times it, what it covers,
/// and its keys in the statistics map (`timer_<name>_<figure>`, in the order
/// of [`TIMER_FIGURES`]).
pub struct TimerDesc {
    /// Which timer.
    pub id: TimerId,
    /// Short name (`send_post`).
    pub name: &'static str,
    /// What one sample covers.
    pub doc: &'static str,
    /// The statistics map's keys of its figures.
    pub keys: [&'static str; 9],
}

/// The figures of each timer: suffixes of its keys in the statistics map
/// and what they are (all durations in nanoseconds). Percentiles come from
/// the histogram ([`super::timers`]): within its bucket width (≤ 50 %).
pub static TIMER_FIGURES: [(&str, &str); 9] = [
    ("count", "samples"),
    ("total_ns", "sum of the samples"),
    ("min_ns", "best sample"),
    ("max_ns", "worst sample"),
    ("avg_ns", "mean"),
    ("p50_ns", "median"),
    ("p90_ns", "90th percentile"),
    ("p99_ns", "99th percentile"),
    ("p999_ns", "99.9th percentile"),
];

macro_rules! timers {
    ($($id:ident = $name:literal, $doc:literal;)*) => {
        /// The operation timers.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum TimerId {
            $(
                #[doc = $doc]
                $id,
            )*
        }

        /// Every timer, by [`TimerId`].
        pub static TIMERS: &[TimerDesc] = &[
            $(TimerDesc {
                id: TimerId::$id,
                name: $name,
                doc: $doc,
                keys: [
                    concat!("timer_", $name, "_count"),
                    concat!("timer_", $name, "_total_ns"),
                    concat!("timer_", $name, "_min_ns"),
                    concat!("timer_", $name, "_max_ns"),
                    concat!("timer_", $name, "_avg_ns"),
                    concat!("timer_", $name, "_p50_ns"),
                    concat!("timer_", $name, "_p90_ns"),
                    concat!("timer_", $name, "_p99_ns"),
                    concat!("timer_", $name, "_p999_ns"),
                ],
            },)*
        ];
    };
}

timers! {
    SendUpcall = "send_upcall", "send thread: the `next_data_to_send` call as a whole (with Java: JNI transition and the Java callee)";
    SendPost = "send_post", "send thread: one post of a chain of send work requests (`ibv_post_send`)";
    SendPoll = "send_poll", "send thread: one poll of the send completion queue (only while work requests are outstanding)";
    RecvPoll = "recv_poll", "receive thread: one poll of the receive completion queue";
    RecvPost = "recv_post", "receive thread: one post of a chain of receive requests to the SRQ (`ibv_post_srq_recv`)";
    RecvUpcall = "recv_upcall", "receive thread: the `received` call as a whole (with Java: JNI transition and the Java callee)";
}

/// Number of timers.
pub const TIMER_COUNT: usize = 6;

const _: () = assert!(TIMER_COUNT == TimerId::RecvUpcall as usize + 1, "TIMER_COUNT matches the timers! table");

impl EngineStats {
    /// The counters by their names in the statistics map.
    pub fn entries(&self) -> Vec<(&'static str, u64)> {
        COUNTERS.iter().map(|c| (c.name, c.value(self))).collect()
    }

    /// Every figure of every timer by its key in the statistics map.
    pub fn timer_entries(&self) -> Vec<(&'static str, u64)> {
        let mut m = Vec::with_capacity(TIMERS.len() * TIMER_FIGURES.len());
        for t in TIMERS {
            let figures = self.timer(t.id).snapshot().figures();
            m.extend(t.keys.iter().copied().zip(figures));
        }
        m
    }
}

/// The gauges of the statistics map (values at the moment it is read, not
/// counts): `connections` follows [`COUNTERS`], the others end the counters
/// (`Engine::stats_map` spells them; a test checks the two agree).
#[rustfmt::skip]
pub static GAUGES: &[(&str, &str)] = &[
    ("connections", "gauge: connections in the connection manager's table, in any state"),
    ("free_buffers", "gauge: receive buffers free in the pool (neither posted nor held by the application)"),
    ("posted_buffers", "gauge: receive buffers posted to the shared receive queue"),
    ("recv_pool_slabs", "gauge: slabs of the receive pool registered now (it grows under load and gives idle slabs back)"),
    ("recv_pool_bytes", "gauge: bytes of receive buffers registered now"),
    ("bytes_per_connection", "gauge: memory each connection registers (its send ring)"),
    ("bytes_per_node", "gauge: the engine's memory estimate: fixed structures, receive pool with its bookkeeping, send rings"),
];

/// Every key of the statistics map except the timers' figures, in its
/// order: [`COUNTERS`], `connections`, the connection manager's
/// ([`CON_COUNTERS`]) and the authentication layer's ([`AUTH_COUNTERS`])
/// counters, then the other [`GAUGES`].
pub fn documented_keys() -> Vec<&'static str> {
    let mut k: Vec<&'static str> = COUNTERS.iter().map(|c| c.name).collect();
    k.push(GAUGES[0].0);
    k.extend(CON_COUNTERS.iter().map(|c| c.name));
    k.extend(AUTH_COUNTERS.iter().map(|c| c.name));
    k.extend(GAUGES[1..].iter().map(|g| g.0));
    k
}

/// The table in docs/operations.md of the engine's statistics (Markdown):
/// every key of [`documented_keys`], then the timers and their figures.
pub fn markdown_table() -> String {
    let mut s = String::from("| key | meaning |\n|---|---|\n");
    for c in COUNTERS {
        s += &format!("| `{}` | {} |\n", c.name, c.doc);
    }
    for (name, doc) in &GAUGES[..1] {
        s += &format!("| `{name}` | {doc} |\n");
    }
    for c in CON_COUNTERS {
        s += &format!("| `{}` | connection manager: {} |\n", c.name, c.doc);
    }
    for c in AUTH_COUNTERS {
        s += &format!("| `{}` | pre-shared key: {} |\n", c.name, c.doc);
    }
    for (name, doc) in &GAUGES[1..] {
        s += &format!("| `{name}` | {doc} |\n");
    }
    for t in TIMERS {
        s += &format!("| `timer_{}_*` | {} |\n", t.name, t.doc);
    }
    let figures: Vec<String> = TIMER_FIGURES.iter().map(|(k, d)| format!("`{k}` {d}")).collect();
    s += &format!("| `timer_<name>_<figure>` | each timer's figures: {} |\n", figures.join(", "));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_is_described_once_and_timers_in_id_order() {
        let s = EngineStats::default();
        s.errors.store(7, Ordering::Relaxed);
        let e = s.entries();
        assert_eq!(e.len(), COUNTERS.len());
        assert!(e.contains(&("errors", 7)));
        let mut names: Vec<&str> = COUNTERS.iter().map(|c| c.name).collect();
        for t in TIMERS {
            names.extend(t.keys);
        }
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "no key twice");
        assert_eq!(TIMERS.len(), TIMER_COUNT);
        for (i, t) in TIMERS.iter().enumerate() {
            assert_eq!(t.id as usize, i);
            for (k, (suffix, _)) in t.keys.iter().zip(TIMER_FIGURES) {
                assert_eq!(*k, format!("timer_{}_{suffix}", t.name));
            }
        }
    }

    /// The descriptor matches the table: every counter has exactly one
    /// slot, slot `i` is `COUNTERS[i]` at `i * COUNTER_STRIDE`, each on its
    /// own cache line, and the descriptor lists them in that order.
    #[test]
    fn descriptor_matches_the_table() {
        let s = EngineStats::default();
        let slots = table_slots(&s);
        assert_eq!(slots.len(), TABLE_SLOTS);
        let base = &s as *const EngineStats as usize;
        let mut names: Vec<&str> = Vec::new();
        for (i, (d, slot)) in slots.iter().enumerate() {
            let at = *slot as *const CounterSlot as usize - base;
            assert_eq!(at, i * COUNTER_STRIDE, "{} is slot {i}", d.name);
            assert_eq!(at % 64, 0, "{} starts a cache line", d.name);
            assert!(in_table(d.name), "{}", d.name);
            names.push(d.name);
            slot.store(1000 + i as u64, Ordering::Relaxed);
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE_SLOTS, "every counter exactly one slot");
        for c in COUNTERS {
            assert_eq!(slots.iter().filter(|(d, _)| d.name == c.name).count(), 1, "{}", c.name);
        }
        assert_eq!(std::mem::align_of::<EngineStats>(), 64);
        for (i, (_, slot)) in slots.iter().enumerate() {
            // What Java does: load at base + i * stride.
            // SAFETY: `base + i * COUNTER_STRIDE` is slot i of `s` (asserted
            // above), an aligned, initialised AtomicU64 that `s` keeps alive.
            let v = unsafe { &*((base + i * COUNTER_STRIDE) as *const std::sync::atomic::AtomicU64) };
            assert_eq!(v.load(Ordering::Relaxed), slot.load(Ordering::Relaxed));
        }
        let text = descriptor_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("counters {TABLE_SLOTS} 64 0"));
        assert_eq!(lines.len(), TABLE_SLOTS + 1);
        for (i, (d, _)) in slots.iter().enumerate() {
            assert_eq!(lines[i + 1], format!("counter {i} {} {} {}", d.name, d.kind.word(), d.doc));
        }
        assert!(text.contains("counter 13 receive_buffers gauge "), "{text}");
        assert!(text.contains("counter 21 connections_created counter "), "{text}");
        // A ConManager counting into the table writes these very slots.
        let shared = std::sync::Arc::new(EngineStats::default());
        let con: crate::sys::counter::Part<ConStats> = crate::sys::counter::Part::of(shared.clone());
        con.created.fetch_add(5, Ordering::Relaxed);
        let slots = table_slots(&shared);
        assert_eq!(slots.iter().find(|(d, _)| d.name == "connections_created").unwrap().1.load(Ordering::Relaxed), 5);
    }

    /// docs/operations.md's statistics table is [`markdown_table`]; with
    /// `IBDXNET_UPDATE_README=1` this test rewrites it instead of failing.
    #[test]
    fn docs_stats_table_is_generated() {
        crate::util::check_doc_section(
            "docs/operations.md",
            "native-stats",
            &markdown_table(),
            "statistics table (stats.rs)",
        );
    }

    #[test]
    fn timer_entries_carry_the_figures() {
        let s = EngineStats::default();
        s.timer(TimerId::RecvPoll).record(100);
        s.timer(TimerId::RecvPoll).record(300);
        let m: std::collections::HashMap<_, _> = s.timer_entries().into_iter().collect();
        assert_eq!(m["timer_recv_poll_count"], 2);
        assert_eq!(m["timer_recv_poll_total_ns"], 400);
        assert_eq!(m["timer_recv_poll_min_ns"], 100);
        assert_eq!(m["timer_recv_poll_max_ns"], 300);
        assert_eq!(m["timer_recv_poll_avg_ns"], 200);
        assert_eq!(m["timer_send_post_count"], 0);
        assert_eq!(m["timer_send_post_min_ns"], 0);
    }
}
