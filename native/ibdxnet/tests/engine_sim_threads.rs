//! The msgrc engine's own threads on `sim`: a handler whose up-call panics
//! stops the engine cleanly, idle threads sleep instead of polling, and
//! pinned threads run only on their CPUs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::engine::{self, all_to_all, sim_config as config, start_sim as start, wait_until};
use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::Engine;

type Node = engine::Node<SimFabric>;

/// A handler whose send-side up-call panics: the engine reports it and
/// shuts down cleanly instead of hanging or aborting.
struct Panicky;

impl ibdxnet::msgrc::EngineHandler for Panicky {
    fn next_data_to_send(
        &self,
        _: &ibdxnet::msgrc::PrevWorkResults,
        _: &ibdxnet::msgrc::CompletedList,
    ) -> ibdxnet::msgrc::NextWorkPackage {
        panic!("handler bug")
    }
    fn received(&self, _: &ibdxnet::msgrc::IncomingRing) -> u32 {
        0
    }
    fn node_event(&self, _: NodeEvent) {}
}

#[test]
fn panicking_handler_stops_the_engine_cleanly() {
    let net = SimNetwork::new();
    let e = Engine::<SimFabric>::start(config(0, &net), Arc::new(Panicky)).unwrap();
    wait_until("engine stopped", || !e.is_running());
    assert_eq!(e.stats().thread_panics.load(std::sync::atomic::Ordering::Relaxed), 1);
    e.shutdown();
}

/// After a stream, with nothing to do, both engine threads block on their
/// events instead of polling: over a second they loop only about once per
/// sleep timeout (100 ms), not tens of thousands of times; `never` polls
/// (never sleeps, keeps looping).
#[test]
fn idle_engine_threads_sleep_until_woken_and_never_keeps_polling() {
    use std::sync::atomic::Ordering::Relaxed;
    let stat = |n: &Node, k: &str| n.engine.stats_map().into_iter().find(|e| e.0 == k).map(|e| e.1).unwrap();
    for (sleep_after, sleeping) in [(Some(Duration::from_micros(200)), true), (None, false)] {
        let opts = StreamOptions { verify: true, limit: Some(1 << 20), ..Default::default() };
        let (_net, nodes) = start(2, opts, |c| {
            c.parking.yield_after = Duration::ZERO;
            c.parking.sleep_after = sleep_after;
        });
        let _held = all_to_all(&nodes, 1 << 20);
        std::thread::sleep(Duration::from_millis(100));
        let before: Vec<_> = ["send_iterations", "recv_iterations", "send_sleeps", "recv_sleeps"]
            .iter()
            .map(|k| stat(&nodes[0], k))
            .collect();
        // A polling thread publishes its count every 1 024 iterations, and on
        // a loaded host (other tests' engines spinning on the same 2 cores)
        // its yields may come back only every few milliseconds: it is given
        // up to 10 s to show one publication, and must not sleep meanwhile.
        let delta = || -> Vec<u64> {
            ["send_iterations", "recv_iterations", "send_sleeps", "recv_sleeps"]
                .iter()
                .zip(&before)
                .map(|(k, b)| stat(&nodes[0], k) - b)
                .collect()
        };
        std::thread::sleep(Duration::from_secs(1));
        let mut d = delta();
        let deadline = std::time::Instant::now() + Duration::from_secs(9);
        while !sleeping && (d[0] == 0 || d[1] == 0) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            d = delta();
        }
        println!(
            "sleep_after {sleep_after:?}: in 1 s idle: iterations send {} recv {}, sleeps send {} recv {}",
            d[0], d[1], d[2], d[3]
        );
        if sleeping {
            // At most one wake-up per timeout, plus the loop around each.
            assert!(d[0] <= 100 && d[1] <= 100, "idle threads looped {d:?}");
            assert!(d[2] >= 5 && d[3] >= 5, "idle threads did not sleep: {d:?}");
        } else {
            assert_eq!((d[2], d[3]), (0, 0), "`never` slept");
            assert!(d[0] >= 1024 && d[1] >= 1024, "polling threads looped only {d:?}");
        }
        assert_eq!(nodes[0].engine.stats().errors.load(Relaxed), 0);
    }
}

/// The CPUs engine thread `name` may run on (its `Cpus_allowed_list`), once
/// it has named itself (the kernel keeps the first 15 bytes of a name).
fn thread_cpus(name: &str) -> Option<String> {
    let comm = &name[..name.len().min(15)];
    std::fs::read_dir("/proc/self/task").expect("/proc/self/task").find_map(|t| {
        let dir = t.ok()?.path();
        if std::fs::read_to_string(dir.join("comm")).ok()?.trim_end() != comm {
            return None;
        }
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(|v| v.trim().to_string())
    })
}

/// `pin_threads`: each pinned thread of a started engine may run on its CPU
/// only; the starting thread keeps its CPUs. Needs two CPUs, so that the
/// send and receive threads get different ones.
#[test]
fn pinned_threads_run_only_on_their_cpus() {
    let allowed = ibdxnet::sys::affinity::allowed_cpus().unwrap();
    if allowed.len() < 2 {
        common::skip_notice(&format!(
            "SKIPPED pinned_threads_run_only_on_their_cpus: this thread may run on {} CPU(s), the test needs 2\n",
            allowed.len()
        ));
        return;
    }
    let (lo, hi) = (allowed[0], allowed[allowed.len() - 1]);
    let net = SimNetwork::new();
    // A node id no other test here uses: the threads are found by name
    // (`ibdxnet-send-7e5` once the kernel cut it to 15 bytes).
    let node = 0x7e57;
    let mut c = config(node, &net);
    c.set("pin_threads", &format!("send={hi},recv={lo},job={hi}")).unwrap();
    let h = StreamHandler::<SimFabric>::new(NodeId(node), StreamOptions::default());
    let e = Engine::<SimFabric>::start(c, h.clone()).unwrap();
    h.set_pool(e.buffer_pool());
    for (role, cpu) in [("send", hi), ("recv", lo), ("job", hi)] {
        let name = format!("ibdxnet-{role}-{node:04x}");
        // The thread is named as it starts and pins itself first thing:
        // once listed, it is pinned or about to be.
        let want = cpu.to_string();
        wait_until(&format!("{name} pinned to CPU {cpu}"), || thread_cpus(&name).as_deref() == Some(&want));
    }
    assert_eq!(ibdxnet::sys::affinity::allowed_cpus().unwrap(), allowed, "the starting thread keeps its CPUs");
    e.shutdown();
}
