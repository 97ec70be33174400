//! The engine's runtime statistics on `sim`: the operation timers in the
//! statistics map, `stats_timers` off, and the print thread
//! (`stats_print_interval_ms`): it prints every interval, once more at
//! shutdown, and is gone after it.

mod common;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::engine::{self, all_to_all, base_config, start_nodes};

use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{FabricKind, SimOptions};
use ibdxnet::loopback::StreamOptions;
use ibdxnet::msgrc::stats::TIMERS;
use ibdxnet::msgrc::stats_print::TARGET;
use ibdxnet::msgrc::EngineConfig;

type Node = engine::Node<SimFabric>;

/// A logger that keeps the statistics lines (and shows warnings and errors).
struct Capture;

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The tests share the logger: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.target() == TARGET || m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record) {
        if r.target() == TARGET {
            LINES.lock().unwrap().push(format!("{}", r.args()));
        } else if r.level() <= log::Level::Warn {
            eprintln!("{} {}: {}", r.level(), r.target(), r.args());
        }
    }
    fn flush(&self) {}
}

fn serial() -> MutexGuard<'static, ()> {
    static LOGGER: Capture = Capture;
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    LINES.lock().unwrap().clear();
    g
}

fn lines() -> Vec<String> {
    LINES.lock().unwrap().clone()
}

fn start(tweak: impl Fn(&mut EngineConfig)) -> (Arc<SimNetwork>, Vec<Node>) {
    let net = SimNetwork::new();
    let nodes = start_nodes(2, StreamOptions { limit: Some(8 << 20), ..Default::default() }, |i| {
        let mut c = base_config(i, FabricKind::Sim);
        c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
        tweak(&mut c);
        c
    });
    (net, nodes)
}

fn stat(n: &Node, key: &str) -> u64 {
    value(&n.engine.stats_map(), key)
}

fn value(m: &[(&str, u64)], key: &str) -> u64 {
    m.iter().find(|(k, _)| *k == key).map(|(_, v)| *v).unwrap_or_else(|| panic!("no {key} in {m:?}"))
}

#[test]
fn timers_count_every_operation_after_traffic() {
    let _g = serial();
    let (_net, nodes) = start(|c| c.stats_timers = true);
    let _held = all_to_all(&nodes, 8 << 20);
    for n in &nodes {
        // One map per node: the engine keeps polling while the figures are
        // read, and a worst sample read from a later map may exceed `max`.
        let m = n.engine.stats_map();
        for t in TIMERS {
            let count = value(&m, t.keys[0]);
            assert!(count > 0, "{} counted nothing: {m:?}", t.name);
            let (min, max, avg) = (value(&m, t.keys[2]), value(&m, t.keys[3]), value(&m, t.keys[4]));
            let p: Vec<u64> = t.keys[5..].iter().map(|k| value(&m, k)).collect();
            assert!(min <= avg && avg <= max, "{}: min {min} avg {avg} max {max}", t.name);
            assert!(p.windows(2).all(|w| w[0] <= w[1]) && min <= p[0] && p[3] <= max, "{}: {p:?}", t.name);
        }
    }
}

#[test]
fn timers_off_count_nothing() {
    let _g = serial();
    let (_net, nodes) = start(|c| c.stats_timers = false);
    let _held = all_to_all(&nodes, 8 << 20);
    for n in &nodes {
        assert!(stat(n, "wrs_sent") > 0);
        for t in TIMERS {
            for k in t.keys {
                assert_eq!(stat(n, k), 0, "{k} with the timers off");
            }
        }
    }
}

#[test]
fn print_thread_prints_every_interval_and_at_shutdown() {
    let _g = serial();
    let (_net, mut nodes) = start(|c| {
        c.stats_print_interval = Duration::from_millis(50);
        c.stats_timers = true;
    });
    let _held = all_to_all(&nodes, 8 << 20);
    let t0 = Instant::now();
    let periodic = |node: u16| {
        lines().iter().filter(|l| l.starts_with(&format!("node 0x{node:04x}: statistics (every 50 ms)"))).count()
    };
    while periodic(0) < 3 || periodic(1) < 3 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no periodic prints: {:?}", lines());
        std::thread::sleep(Duration::from_millis(10));
    }
    // The kernel keeps 15 bytes of a thread's name: `ibdxnet-stats-0`.
    let printers = || threads().iter().filter(|t| t.starts_with("ibdxnet-stats")).count();
    assert_eq!(printers(), 2, "{:?}", threads());
    let b = nodes.pop().unwrap();
    let sent = stat(&b, "wrs_sent");
    b.engine.shutdown();
    let after = lines();
    let fin = after.iter().position(|l| l == "node 0x0001: statistics (final)").expect("a final print at shutdown");
    // The final print has the counters of the stopped engine and every timer.
    assert!(after[fin + 1].starts_with("node 0x0001: counters wrs_sent="), "{}", after[fin + 1]);
    assert!(after[fin + 1].contains(&format!("wrs_sent={sent} ")), "{}", after[fin + 1]);
    for t in TIMERS {
        let l = after[fin..].iter().find(|l| l.starts_with(&format!("node 0x0001: timer {} ", t.name)));
        let l = l.unwrap_or_else(|| panic!("no line of {}: {after:?}", t.name));
        assert!(!l.contains("count=0 "), "{l}");
    }
    // Joined: node 1 prints nothing more.
    std::thread::sleep(Duration::from_millis(200));
    let node1 = |v: &[String]| v.iter().filter(|l| l.starts_with("node 0x0001:")).count();
    assert_eq!(node1(&lines()), node1(&after), "node 1 printed after its shutdown");
    assert_eq!(printers(), 1, "node 1's print thread is gone: {:?}", threads());
}

#[test]
fn no_print_thread_by_default() {
    let _g = serial();
    let (_net, nodes) = start(|_| {});
    assert_eq!(nodes[0].engine.config().stats_print_interval, Duration::ZERO);
    let _held = all_to_all(&nodes, 8 << 20);
    drop(nodes);
    assert!(lines().is_empty(), "{:?}", lines());
    assert!(!threads().iter().any(|t| t.starts_with("ibdxnet-stats")), "{:?}", threads());
}

/// The names of this process's threads (as the kernel keeps them: 15 bytes).
fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim_end().to_string())
        .collect()
}

/// The documented table (`docs/operations.md`, generated from
/// `documented_keys`) names exactly the keys the map has, in its order.
#[test]
fn the_statistics_map_has_exactly_the_documented_keys() {
    let (_net, nodes) = start(|_| {});
    let keys: Vec<&str> =
        nodes[0].engine.stats_map().into_iter().map(|(k, _)| k).filter(|k| !k.starts_with("timer_")).collect();
    assert_eq!(keys, ibdxnet::msgrc::stats::documented_keys());
}
