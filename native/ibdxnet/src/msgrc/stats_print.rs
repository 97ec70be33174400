//! The statistics print thread (`stats_print_interval_ms`, upstream's
//! `statisticsThreadPrintIntervalMs`): every interval it logs the counters
//! and the timers (log target [`TARGET`], level INFO), and once more when
//! the engine shuts down.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::stats::{EngineStats, TIMERS};
use crate::con::NodeId;

/// The log target of the statistics lines.
pub const TARGET: &str = "ibdxnet::stats";

/// A duration for people: ns, µs, ms or s with three significant digits.
pub fn human_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.3} µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.3} ms", f / 1e6)
    } else {
        format!("{:.3} s", f / 1e9)
    }
}

/// The statistics lines of one print: a head line, the counters, one line
/// per timer. `counters` is the statistics map without the timers.
pub fn lines(node: NodeId, what: &str, counters: &[(&str, u64)], stats: &EngineStats, timers_on: bool) -> Vec<String> {
    let mut out = Vec::with_capacity(2 + TIMERS.len());
    out.push(format!("node {node}: statistics ({what})"));
    let c: Vec<String> = counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
    out.push(format!("node {node}: counters {}", c.join(" ")));
    if !timers_on {
        out.push(format!("node {node}: timers off (stats_timers = false)"));
        return out;
    }
    for t in TIMERS {
        let s = stats.timer(t.id).snapshot();
        out.push(format!(
            "node {node}: timer {} count={} total={} avg={} best={} worst={} p50={} p90={} p99={} p99.9={}",
            t.name,
            s.count,
            human_ns(s.total_ns),
            human_ns(s.avg()),
            human_ns(s.min()),
            human_ns(s.max_ns),
            human_ns(s.percentile(500)),
            human_ns(s.percentile(900)),
            human_ns(s.percentile(990)),
            human_ns(s.percentile(999)),
        ));
    }
    out
}

/// What the print thread prints: the lines of one print, given its label.
pub type Report = Box<dyn Fn(&str) -> Vec<String> + Send>;

/// The running print thread; [`StatsPrinter::stop`] (or dropping it) ends
/// it after a final print.
#[derive(Debug)]
pub struct StatsPrinter {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

fn print(report: &Report, what: &str) {
    for l in report(what) {
        log::info!(target: TARGET, "{l}");
    }
}

impl StatsPrinter {
    /// Starts the thread `name`, printing `report` every `interval`.
    pub fn start(name: String, interval: Duration, report: Report) -> std::io::Result<StatsPrinter> {
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            let every = format!("every {} ms", interval.as_millis());
            // A message or a closed channel both mean stop.
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(interval) {
                print(&report, &every);
            }
            print(&report, "final");
        })?;
        Ok(StatsPrinter { stop: Some(tx), thread: Some(thread) })
    }

    /// Stops the thread after its final print and joins it.
    pub fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                log::error!("the statistics print thread panicked");
            }
        }
    }
}

impl Drop for StatsPrinter {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgrc::stats::TimerId;

    #[test]
    fn durations_for_people() {
        assert_eq!(human_ns(999), "999 ns");
        assert_eq!(human_ns(1_500), "1.500 µs");
        assert_eq!(human_ns(2_345_678), "2.346 ms");
        assert_eq!(human_ns(3_000_000_000), "3.000 s");
    }

    #[test]
    fn lines_name_counters_and_timers() {
        let s = EngineStats::default();
        s.timer(TimerId::SendPost).record(800);
        let l = lines(NodeId(3), "final", &[("wrs_sent", 5)], &s, true);
        assert_eq!(l[0], "node 0x0003: statistics (final)");
        assert_eq!(l[1], "node 0x0003: counters wrs_sent=5");
        assert_eq!(l.len(), 2 + TIMERS.len());
        let post = l.iter().find(|l| l.contains("timer send_post ")).unwrap();
        assert!(post.contains("count=1 total=800 ns avg=800 ns best=800 ns worst=800 ns p50=800 ns"), "{post}");
        let off = lines(NodeId(3), "final", &[], &s, false);
        assert_eq!(off.len(), 3);
        assert!(off[2].contains("timers off"));
    }

    #[test]
    fn stops_promptly_with_a_final_print() {
        let (tx, rx) = mpsc::channel();
        let report: Report = Box::new(move |what| {
            tx.send(what.to_string()).unwrap();
            vec![]
        });
        let t0 = std::time::Instant::now();
        let mut p = StatsPrinter::start("stats-test".into(), Duration::from_secs(3600), report).unwrap();
        p.stop();
        assert!(t0.elapsed() < Duration::from_secs(5), "not waiting for the interval");
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec!["final".to_string()]);
    }
}
