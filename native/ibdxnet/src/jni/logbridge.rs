//! One log: the engine's `log` records reach Java's `System.Logger`.
//!
//! `JNI_OnLoad` installs [`Bridge`] as the process's logger. Until a Java
//! thread starts draining it ([`start`], called by `io.ibdxnet.ib.NativeLog`),
//! and always in upstream-compat mode (no io.ibdxnet jar) or when `RUST_LOG`
//! is set, it is the `env_logger` the library used before: records go to
//! stderr. Once Java drains it, a record is formatted and put in a bounded
//! lock-free queue (two [`IndexQueue`]s over a fixed set of slots), never a
//! JNI call: any thread may log, attached to the JVM or not, and a logging
//! engine thread never waits on Java. A full queue drops the record and
//! counts it; the next drain reports the count. The Java drain thread takes
//! the records out ([`drain`]) and hands them to `System.getLogger(name)`
//! with the record's level; which levels the engine formats at all follows
//! the levels Java's loggers enable ([`set_level`], refreshed by the drain
//! thread).
//!
//! Logger names are the record targets with `::` as `.`
//! (`ibdxnet::con::manager` → `ibdxnet.con.manager`); [`TARGETS`] lists the
//! ones the library logs on (checked against the sources and docs/operations.md).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use log::{Level, LevelFilter, Log, Metadata, Record};

use crate::sys::queue::IndexQueue;
use crate::util::lock;

/// Every target the library logs on (module paths and the statistics
/// target), as Rust names them. Java maps them with [`java_name`].
pub const TARGETS: &[&str] = &[
    "ibdxnet::con::auth",
    "ibdxnet::con::manager",
    "ibdxnet::con::manager::close",
    "ibdxnet::con::manager::discovery",
    "ibdxnet::con::manager::exchange",
    "ibdxnet::con::manager::foreign",
    "ibdxnet::con::manager::job_loop",
    "ibdxnet::con::manager::wire",
    "ibdxnet::driver",
    "ibdxnet::fabric::simcq",
    "ibdxnet::fabric::simhost::wire",
    "ibdxnet::fabric::verbs",
    "ibdxnet::fabric::verbs::qp",
    "ibdxnet::fabric::verbs::resources",
    "ibdxnet::jni",
    "ibdxnet::jni::bench",
    "ibdxnet::jni::compat",
    "ibdxnet::jni::compat::handler",
    "ibdxnet::jni::compat::held",
    "ibdxnet::jni::compat::natives",
    "ibdxnet::jni::handler",
    "ibdxnet::jni::logbridge",
    "ibdxnet::msgrc::agent",
    "ibdxnet::msgrc::engine",
    "ibdxnet::msgrc::recv",
    "ibdxnet::msgrc::recv_agent",
    "ibdxnet::msgrc::send",
    "ibdxnet::msgrc::send_agent",
    "ibdxnet::msgrc::stats_print",
    "ibdxnet::sys::region",
    "ibdxnet::sys::write_watch",
    crate::msgrc::stats_print::TARGET,
];

/// Records the queue holds; beyond that they are dropped and counted.
pub const CAPACITY: usize = 4096;

/// At most this many records per [`drain`].
const DRAIN_BATCH: usize = 256;

/// The Java logger name of a Rust target: `::` becomes `.`.
pub fn java_name(target: &str) -> String {
    target.replace("::", ".")
}

struct Entry {
    level: Level,
    target: String,
    message: String,
}

/// The library's logger: stderr (`env_logger`) or the queue to Java.
pub struct Bridge {
    stderr: env_logger::Logger,
    /// `RUST_LOG` is set: it decides, and records stay on stderr.
    overridden: bool,
    /// A Java thread drains the queue.
    java: AtomicBool,
    /// The most verbose level Java's loggers enable (a `LevelFilter` as usize).
    java_level: AtomicUsize,
    slots: Box<[Mutex<Option<Entry>>]>,
    free: IndexQueue,
    full: IndexQueue,
    dropped: AtomicU64,
    /// The drain thread is parked (or about to): a producer unparks it.
    sleeping: AtomicBool,
    drainer: Mutex<Option<Thread>>,
}

static BRIDGE: OnceLock<Bridge> = OnceLock::new();

fn filter_of(v: usize) -> LevelFilter {
    match v {
        0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

impl Bridge {
    /// A bridge writing to stderr with `default_filter` unless `RUST_LOG` says otherwise.
    pub fn new(default_filter: &str) -> Bridge {
        let overridden = std::env::var_os("RUST_LOG").is_some();
        let stderr =
            env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_filter)).build();
        let free = IndexQueue::new(CAPACITY);
        let full = IndexQueue::new(CAPACITY);
        for i in 0..CAPACITY as u32 {
            free.push(i).expect("the free list holds every slot");
        }
        Bridge {
            stderr,
            overridden,
            java: AtomicBool::new(false),
            java_level: AtomicUsize::new(LevelFilter::Info as usize),
            slots: (0..CAPACITY).map(|_| Mutex::new(None)).collect(),
            free,
            full,
            dropped: AtomicU64::new(0),
            sleeping: AtomicBool::new(false),
            drainer: Mutex::new(None),
        }
    }

    fn to_java(&self) -> bool {
        self.java.load(Ordering::Acquire)
    }

    fn java_filter(&self) -> LevelFilter {
        filter_of(self.java_level.load(Ordering::Relaxed))
    }

    /// The level `log` lets through to [`Log::log`] at all.
    fn max_level(&self) -> LevelFilter {
        if self.to_java() {
            self.java_filter()
        } else {
            self.stderr.filter()
        }
    }

    /// Takes a slot off the free list and queues `entry`; false if full.
    fn enqueue(&self, entry: Entry) -> bool {
        let Some(i) = self.free.pop() else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        *lock(&self.slots[i as usize]) = Some(entry);
        // Every index is in at most one queue, so `full` has room; a push
        // fails only while a pop elsewhere is between its two steps.
        while self.full.push(i).is_err() {
            std::hint::spin_loop();
        }
        if self.sleeping.swap(false, Ordering::AcqRel) {
            // Never wait here: if the drain thread holds the lock it is awake.
            if let Ok(t) = self.drainer.try_lock() {
                if let Some(t) = t.as_ref() {
                    t.unpark();
                }
            }
        }
        true
    }

    fn dequeue(&self) -> Option<Entry> {
        let i = self.full.pop()?;
        let e = lock(&self.slots[i as usize]).take();
        while self.free.push(i).is_err() {
            std::hint::spin_loop();
        }
        e
    }
}

impl Log for Bridge {
    fn enabled(&self, m: &Metadata) -> bool {
        if self.to_java() {
            m.level() <= self.java_filter()
        } else {
            self.stderr.enabled(m)
        }
    }

    fn log(&self, r: &Record) {
        if !self.to_java() {
            self.stderr.log(r);
            return;
        }
        if r.level() > self.java_filter() {
            return;
        }
        self.enqueue(Entry { level: r.level(), target: r.target().to_owned(), message: r.args().to_string() });
    }

    fn flush(&self) {
        self.stderr.flush();
    }
}

/// Installs the bridge as the process's logger (stderr until Java drains
/// it). False if the process had a logger already (an embedding
/// application's, which then gets the records).
pub fn install(default_filter: &str) -> bool {
    let bridge = BRIDGE.get_or_init(|| Bridge::new(default_filter));
    if log::set_logger(bridge).is_err() {
        return false;
    }
    log::set_max_level(bridge.max_level());
    true
}

/// The installed bridge, if `install` made it the process's logger.
fn installed() -> Option<&'static Bridge> {
    BRIDGE.get()
}

/// Called by Java's drain thread: from now on records go to the queue, at
/// `level` and more severe. False (records stay on stderr) if `RUST_LOG` is
/// set or the bridge is not the process's logger.
pub fn start(level: LevelFilter) -> bool {
    let Some(b) = installed() else { return false };
    if b.overridden || !std::ptr::eq(log::logger() as *const dyn Log as *const u8, b as *const Bridge as *const u8) {
        return false;
    }
    *lock(&b.drainer) = Some(std::thread::current());
    b.java_level.store(level as usize, Ordering::Relaxed);
    b.java.store(true, Ordering::Release);
    log::set_max_level(level);
    true
}

/// The most verbose level Java's loggers enable now.
pub fn set_level(level: LevelFilter) {
    if let Some(b) = installed() {
        if b.to_java() {
            b.java_level.store(level as usize, Ordering::Relaxed);
            log::set_max_level(level);
        }
    }
}

/// A drained record: its level, its Java logger name, its text.
pub struct Drained {
    /// Its level.
    pub level: Level,
    /// `ibdxnet.con.manager`, …
    pub logger: String,
    /// The formatted message.
    pub message: String,
}

/// Up to a batch of records, oldest first, waiting up to `wait` for the
/// first (parked: a producer unparks). A count of dropped records comes
/// first, as a warning on logger `ibdxnet.jni.logbridge`.
pub fn drain(wait: Duration) -> Vec<Drained> {
    let Some(b) = installed() else {
        std::thread::sleep(wait);
        return Vec::new();
    };
    let mut out = Vec::new();
    let take = |out: &mut Vec<Drained>| {
        let dropped = b.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            out.push(Drained {
                level: Level::Warn,
                logger: java_name(module_path!()),
                message: format!("{dropped} native log records dropped (the queue of {CAPACITY} to Java was full)"),
            });
        }
        while out.len() < DRAIN_BATCH {
            let Some(e) = b.dequeue() else { break };
            out.push(Drained { level: e.level, logger: java_name(&e.target), message: e.message });
        }
    };
    take(&mut out);
    if out.is_empty() && !wait.is_zero() {
        b.sleeping.store(true, Ordering::Release);
        // A record queued between `take` and `sleeping` is seen here.
        if b.full.is_empty() && b.dropped.load(Ordering::Relaxed) == 0 {
            std::thread::park_timeout(wait);
        }
        b.sleeping.store(false, Ordering::Release);
        take(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_names_replace_the_separators() {
        assert_eq!(java_name("ibdxnet::con::manager"), "ibdxnet.con.manager");
        assert_eq!(java_name("ibdxnet"), "ibdxnet");
    }

    #[test]
    fn the_queue_is_fifo_bounded_and_counts_drops() {
        let b = Bridge::new("warn");
        b.java.store(true, Ordering::Release);
        let e = |i: usize| Entry { level: Level::Warn, target: "t".into(), message: i.to_string() };
        for i in 0..CAPACITY {
            assert!(b.enqueue(e(i)));
        }
        assert!(!b.enqueue(e(CAPACITY)), "a full queue drops");
        assert_eq!(b.dropped.load(Ordering::Relaxed), 1);
        for i in 0..CAPACITY {
            assert_eq!(b.dequeue().map(|e| e.message), Some(i.to_string()));
        }
        assert!(b.dequeue().is_none());
        assert!(b.enqueue(e(0)), "drained slots are free again");
    }

    /// Every module that logs, and the statistics target, is in [`TARGETS`],
    /// and docs/operations.md's list of logger names is [`TARGETS`].
    #[test]
    fn every_logging_module_is_a_documented_target() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        let mut stack = vec![src.clone()];
        let macros = ["error!(", "warn!(", "info!(", "debug!(", "trace!("];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let rel = p.strip_prefix(&src).unwrap().with_extension("");
                let parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
                if parts.first().map(String::as_str) == Some("bin") || p.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                // Code before a `#[cfg(test)]` module: tests' own records do not count.
                let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
                if !code.lines().any(|l| !l.trim_start().starts_with("//") && macros.iter().any(|m| l.contains(m))) {
                    continue;
                }
                let mut path: Vec<&str> = vec!["ibdxnet"];
                path.extend(parts.iter().map(String::as_str).filter(|s| *s != "lib" && *s != "mod"));
                found.push(path.join("::"));
            }
        }
        found.sort();
        for t in &found {
            assert!(TARGETS.contains(&t.as_str()), "{t} logs but is not in jni::logbridge::TARGETS");
        }
        let mut table = String::from("| logger (Java `System.Logger` name) | Rust target |\n|---|---|\n");
        for t in TARGETS {
            table += &format!("| `{}` | `{t}` |\n", java_name(t));
        }
        crate::util::check_doc_section("docs/operations.md", "log targets", &table, "list of native logger names");
    }
}
