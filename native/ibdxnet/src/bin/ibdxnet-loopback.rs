//! `ibdxnet-loopback`: the native-only throughput test (paper §7, §9.2.4).
//! N nodes run in this process (one engine each, connected over UDP on
//! 127.0.0.1); every node streams its send rings round-robin to every other
//! node and returns received buffers untouched.
//!
//! ```text
//! ibdxnet-loopback [--fabric auto|sim|simhost|verbs] [--device NAME] [--gid-index N]
//!                  [--nodes N] [--duration SECS] [--ring BYTES] [--recv-buffer BYTES]
//!                  [--sges N] [--sq N] [--srq N] [--signal K] [--inline BYTES] [--verify] [--one-way] [--json]
//!                  [--yield-after-ms MS] [--park-after-ms MS] [--set KEY=VALUE]...
//! ```
//!
//! `--set`: any engine configuration key (e.g. `stats_timers=false`,
//! `stats_print_interval_ms=1000` with `RUST_LOG=info`), applied last.
//!
//! `--one-way`: only node 0 sends (like `ib_send_bw` without `-b`).
//! `--measure-parking`: instead, measure the wake-up latency of each parking phase.
//! `--measure-timer`: instead, measure what timing one operation costs (`stats_timers`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ibdxnet::con::NodeId;
use ibdxnet::fabric::sim::SimFabric;
use ibdxnet::fabric::simhost::SimHostFabric;
use ibdxnet::fabric::verbs::VerbsFabric;
use ibdxnet::fabric::{Fabric, FabricKind};
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::stats::TIMERS;
use ibdxnet::msgrc::timers::{Clock, Timer};
use ibdxnet::msgrc::{Engine, EngineConfig};

struct Args {
    fabric: FabricKind,
    device: Option<String>,
    gid_index: Option<u8>,
    nodes: u16,
    duration: f64,
    ring: u32,
    recv_buffer: u32,
    sges: u32,
    sq: u32,
    srq: u32,
    signal: u32,
    inline: u32,
    verify: bool,
    json: bool,
    one_way: bool,
    yield_after_ms: Option<u64>,
    park_after_ms: Option<u64>,
    set: Vec<(String, String)>,
}

fn usage() -> ! {
    eprintln!(
        "usage: ibdxnet-loopback [--fabric auto|sim|simhost|verbs] [--device NAME] [--gid-index N] [--nodes N] \
         [--duration SECS] [--ring BYTES] [--recv-buffer BYTES] [--sges N] [--sq N] [--srq N] [--signal K] \
         [--inline BYTES] [--verify] [--one-way] [--json] [--yield-after-ms MS] [--park-after-ms MS] \
         [--set KEY=VALUE]..."
    );
    std::process::exit(2)
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        fabric: FabricKind::Auto,
        device: None,
        gid_index: None,
        nodes: 2,
        duration: 5.0,
        ring: 4 << 20,
        recv_buffer: 32 << 10,
        sges: 4,
        sq: 20,
        srq: 2000,
        signal: 4,
        inline: 128,
        verify: false,
        json: false,
        one_way: false,
        yield_after_ms: None,
        park_after_ms: None,
        set: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--fabric" => a.fabric = FabricKind::parse(&val()?).map_err(|e| format!("--fabric: {e}"))?,
            "--device" => a.device = Some(val()?),
            "--gid-index" => a.gid_index = Some(num(val()?)?.try_into().map_err(|_| "--gid-index: 0..255")?),
            "--nodes" => a.nodes = num(val()?)?.try_into().map_err(|_| "--nodes: too many")?,
            "--duration" => a.duration = val()?.parse().map_err(|e| format!("--duration: {e}"))?,
            "--ring" => a.ring = num(val()?)? as u32,
            "--recv-buffer" => a.recv_buffer = num(val()?)? as u32,
            "--sges" => a.sges = num(val()?)? as u32,
            "--sq" => a.sq = num(val()?)? as u32,
            "--srq" => a.srq = num(val()?)? as u32,
            "--signal" => a.signal = num(val()?)? as u32,
            "--inline" => a.inline = num(val()?)? as u32,
            "--verify" => a.verify = true,
            "--json" => a.json = true,
            "--one-way" => a.one_way = true,
            "--yield-after-ms" => a.yield_after_ms = Some(num(val()?)?),
            "--park-after-ms" => a.park_after_ms = Some(num(val()?)?),
            "--set" => {
                let v = val()?;
                let (k, v) = v.split_once('=').ok_or_else(|| format!("--set {v}: KEY=VALUE"))?;
                a.set.push((k.trim().to_string(), v.trim().to_string()));
            }
            "-h" | "--help" => usage(),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if a.nodes < 2 {
        return Err("--nodes must be at least 2".into());
    }
    if a.duration.is_nan() || a.duration <= 0.0 {
        return Err("--duration must be positive".into());
    }
    Ok(a)
}

fn run<F: Fabric>(a: &Args, kind: FabricKind) -> Result<(), String> {
    let mut engines = Vec::new();
    for i in 0..a.nodes {
        let mut c = EngineConfig::new(NodeId(i), "127.0.0.1:0".parse().unwrap());
        c.fabric = kind;
        c.device.device = a.device.clone();
        c.device.gid_index = a.gid_index;
        c.send_ring_size = a.ring;
        c.recv_buffer_size = a.recv_buffer;
        c.recv_sges_per_wr = a.sges;
        c.sq_size = a.sq;
        c.srq_size = a.srq;
        c.recv_buffer_count = (a.srq * a.sges * 2).max(1024);
        c.signal_interval = a.signal.min(a.sq);
        c.max_inline = a.inline;
        if let Some(ms) = a.yield_after_ms {
            c.parking.yield_after = Duration::from_millis(ms);
        }
        if let Some(ms) = a.park_after_ms {
            c.parking.park_after = Duration::from_millis(ms);
        }
        for (k, v) in &a.set {
            c.set(k, v).map_err(|e| format!("--set: {e}"))?;
        }
        let h = StreamHandler::<F>::new(NodeId(i), StreamOptions { verify: a.verify, ..Default::default() });
        let e = Engine::<F>::start(c, h.clone()).map_err(|e| format!("node {i}: {e}"))?;
        h.set_pool(e.buffer_pool());
        engines.push((e, h));
    }
    let addrs: Vec<_> = engines.iter().map(|(e, _)| e.manager().local_addr()).collect();
    for (i, (e, _)) in engines.iter().enumerate() {
        for (j, addr) in addrs.iter().enumerate() {
            if i != j {
                e.add_node(NodeId(j as u16), *addr).map_err(|err| err.to_string())?;
            }
        }
    }
    let mut held = Vec::new();
    for (i, (e, h)) in engines.iter().enumerate() {
        for j in 0..a.nodes {
            if usize::from(j) != i {
                let c = e.connect(NodeId(j)).map_err(|err| format!("node {i} → {j}: {err}"))?;
                if !a.one_way || i == 0 {
                    // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
                    unsafe { h.add_target(NodeId(j), c.ring().address(), c.ring().size()) };
                }
                held.push(c);
            }
        }
    }
    let info = engines[0].0.manager().queues().fabric.info().clone();
    if !a.json {
        eprintln!(
            "ibdxnet-loopback: {} nodes on {} ({}), mtu {}, ring {} B, recv {} × {} B, sq {}, srq {}, signal every {}",
            a.nodes,
            info.name,
            F::KIND.name(),
            info.active_mtu,
            a.ring,
            a.sges,
            a.recv_buffer,
            a.sq,
            a.srq,
            a.signal
        );
    }
    // Warm-up, then measure.
    let warm = Duration::from_secs_f64((a.duration * 0.2).min(1.0));
    std::thread::sleep(warm);
    let snap = |engines: &[(Engine<F>, std::sync::Arc<StreamHandler<F>>)]| {
        let bytes: u64 = engines.iter().map(|(_, h)| h.received.load(Ordering::Relaxed)).sum();
        let wrs: u64 = engines.iter().map(|(e, _)| e.stats().messages_received.load(Ordering::Relaxed)).sum();
        (bytes, wrs)
    };
    // Timed operations and loop iterations of every engine thread.
    let ops = |engines: &[(Engine<F>, std::sync::Arc<StreamHandler<F>>)]| {
        let timed: u64 =
            engines.iter().flat_map(|(e, _)| TIMERS.iter().map(|t| e.stats().timer(t.id).snapshot().count)).sum();
        let s = |e: &Engine<F>| {
            e.stats().send_iterations.load(Ordering::Relaxed) + e.stats().recv_iterations.load(Ordering::Relaxed)
        };
        (timed, engines.iter().map(|(e, _)| s(e)).sum::<u64>())
    };
    let (o0, i0) = ops(&engines);
    let c0 = process_cpu_s();
    let (b0, w0) = snap(&engines);
    let t0 = Instant::now();
    let total = Duration::from_secs_f64(a.duration);
    let mut next_report = Duration::from_secs(1);
    while t0.elapsed() < total {
        std::thread::sleep(Duration::from_millis(50));
        if !a.json && t0.elapsed() >= next_report {
            let (b, _) = snap(&engines);
            eprintln!(
                "  {:>5.1} s: {:.3} GB/s",
                t0.elapsed().as_secs_f64(),
                (b - b0) as f64 / t0.elapsed().as_secs_f64() / 1e9
            );
            next_report += Duration::from_secs(1);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let (b1, w1) = snap(&engines);
    let (o1, i1) = ops(&engines);
    let cpu = process_cpu_s() - c0;
    for (_, h) in &engines {
        h.stop_sending();
    }
    let corrupt: u64 = engines.iter().flat_map(|(_, h)| h.incoming().into_values()).map(|s| s.corrupt).sum();
    let errors: u64 = engines.iter().map(|(e, _)| e.stats().errors.load(Ordering::Relaxed)).sum();
    let timers = engines[0].0.config().stats_timers;
    let gbps = (b1 - b0) as f64 / secs / 1e9;
    let wrs = (w1 - w0) as f64 / secs;
    if a.json {
        println!(
            "{{\"tool\":\"ibdxnet-loopback\",\"fabric\":\"{}\",\"device\":\"{}\",\"nodes\":{},\"seconds\":{:.3},\"bytes\":{},\"gb_per_s\":{:.4},\"wrs_per_s\":{:.0},\"ring\":{},\"recv_buffer\":{},\"sges\":{},\"sq\":{},\"srq\":{},\"signal\":{},\"verify\":{},\"one_way\":{},\"corrupt_bytes\":{},\"errors\":{},\"stats_timers\":{},\"timed_ops_per_s\":{:.0},\"iterations_per_s\":{:.0},\"process_cpu_s\":{:.3}}}",
            F::KIND.name(), info.name, a.nodes, secs, b1 - b0, gbps, wrs, a.ring, a.recv_buffer, a.sges, a.sq, a.srq, a.signal, a.verify, a.one_way, corrupt, errors, timers, (o1 - o0) as f64 / secs, (i1 - i0) as f64 / secs, cpu
        );
    } else {
        println!(
            "throughput {gbps:.3} GB/s ({:.1} MiB/s), {wrs:.0} WRs/s received, over {secs:.2} s",
            gbps * 1e9 / 1048576.0
        );
        if a.verify {
            println!("verified: {corrupt} corrupt or reordered bytes");
        }
        println!("errors: {errors}");
    }
    drop(held);
    for (e, _) in engines {
        e.shutdown();
    }
    if corrupt > 0 || errors > 0 {
        return Err(format!("{corrupt} corrupt bytes, {errors} errors"));
    }
    Ok(())
}

/// `--measure-parking`: wake-up latency of a thread in each parking phase.
fn measure_parking() {
    use ibdxnet::sys::parking::{measure_wakeup, Phase};
    let pct = |v: &[u64], p: f64| v[((v.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
    println!("wake-up latency of an idle engine thread (1000 samples, 1 ms apart), µs:");
    println!("{:<6} {:>9} {:>9} {:>9} {:>9}", "phase", "p50", "p90", "p99", "max");
    let phases = [("busy", Phase::Busy), ("yield", Phase::Yield), ("park", Phase::Park), ("sleep", Phase::Sleep)];
    for (name, phase) in phases {
        let v = measure_wakeup(phase, 1000, Duration::from_millis(1));
        println!("{name:<6} {:>9.2} {:>9.2} {:>9.2} {:>9.2}", pct(&v, 0.5), pct(&v, 0.9), pct(&v, 0.99), pct(&v, 1.0));
    }
}

/// CPU time of this process so far (user + system), s.
fn process_cpu_s() -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    // SAFETY: clock_gettime writes one timespec into the zeroed struct it is given.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What timing one operation costs an engine thread (`stats_timers`): the
/// clock read at its start, the clock read at its end and the record, as
/// the send and receive threads do it; and with the clock off.
fn measure_timer() {
    let n = 20_000_000u32;
    let t = Timer::default();
    for on in [true, false] {
        let clock = Clock { on };
        let (t0, c0) = (Instant::now(), thread_cpu_ns());
        for _ in 0..n {
            let s = clock.start();
            std::hint::black_box(&s);
            t.record_since(s);
        }
        let ns = t0.elapsed().as_nanos() as f64 / f64::from(n);
        let cpu = (thread_cpu_ns() - c0) as f64 / f64::from(n);
        println!("stats_timers={on}: {ns:.1} ns per timed operation, {cpu:.1} ns of thread CPU time ({n} operations)");
    }
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    if std::env::args().any(|a| a == "--measure-timer") {
        measure_timer();
        return;
    }
    if std::env::args().any(|a| a == "--measure-parking") {
        measure_parking();
        return;
    }
    let a = parse().unwrap_or_else(|e| {
        eprintln!("ibdxnet-loopback: {e}");
        usage()
    });
    let kind = a.fabric.resolve().unwrap_or_else(|e| {
        eprintln!("ibdxnet-loopback: {e}");
        std::process::exit(2)
    });
    let r = match kind {
        FabricKind::Verbs => run::<VerbsFabric>(&a, kind),
        FabricKind::SimHost => run::<SimHostFabric>(&a, kind),
        _ => run::<SimFabric>(&a, FabricKind::Sim),
    };
    if let Err(e) = r {
        eprintln!("ibdxnet-loopback: {e}");
        std::process::exit(1);
    }
}
