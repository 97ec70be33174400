//! Engine test helpers shared by the sim and verbs engine suites.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibdxnet::con::{Connection, NodeId};
use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::{Fabric, FabricKind, SimOptions};
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::{Engine, EngineConfig, EngineHandler};

/// Upper bound for anything a test waits for.
pub const WAIT: Duration = Duration::from_secs(120);

pub struct Node<F: Fabric> {
    pub engine: Engine<F>,
    pub handler: Arc<StreamHandler<F>>,
}

/// Test-sized engine settings on 127.0.0.1 with an OS-chosen UDP port.
pub fn base_config(id: u16, kind: FabricKind) -> EngineConfig {
    let mut c = EngineConfig::new(NodeId(id), "127.0.0.1:0".parse().unwrap());
    c.fabric = kind;
    c.send_ring_size = 1 << 20;
    c.srq_size = 256;
    c.recv_buffer_count = 2048;
    c.incoming_ring_size = 2048;
    c.connect_timeout = Duration::from_secs(10);
    c
}

/// [`base_config`] on `sim`, on the simulated network `net`.
pub fn sim_config(id: u16, net: &Arc<SimNetwork>) -> EngineConfig {
    let mut c = base_config(id, FabricKind::Sim);
    c.device.sim = SimOptions { network: Some(net.clone()), ..Default::default() };
    c
}

/// `n` streaming nodes on a new simulated network, each [`sim_config`] changed by `tweak`.
pub fn start_sim(
    n: u16,
    opts: StreamOptions,
    tweak: impl Fn(&mut EngineConfig),
) -> (Arc<SimNetwork>, Vec<Node<SimFabric>>) {
    let net = SimNetwork::new();
    let nodes = start_nodes(n, opts, |i| {
        let mut c = sim_config(i, &net);
        tweak(&mut c);
        c
    });
    (net, nodes)
}

/// Starts `n` engines (config from `config(i)`) that know each other.
pub fn start_nodes<F: Fabric>(n: u16, opts: StreamOptions, config: impl Fn(u16) -> EngineConfig) -> Vec<Node<F>> {
    let nodes = start_nodes_unlinked(n, opts, config);
    link(nodes.iter().map(|n| &n.engine));
    nodes
}

/// As `start_nodes`, but no node knows another yet (`link` adds them):
/// a test can watch the wire before the first discovery.
pub fn start_nodes_unlinked<F: Fabric>(
    n: u16,
    opts: StreamOptions,
    config: impl Fn(u16) -> EngineConfig,
) -> Vec<Node<F>> {
    let _ = env_logger::Builder::from_default_env().is_test(true).try_init();
    (0..n)
        .map(|i| {
            let handler = StreamHandler::new(NodeId(i), opts.clone());
            let engine = Engine::<F>::start(config(i), handler.clone()).expect("engine start");
            handler.set_pool(engine.buffer_pool());
            Node { engine, handler }
        })
        .collect()
}

/// Starts `n` engines with handlers from `handler(i)` and configs from
/// `config(i)`, and adds every node to every other's node table.
pub fn start_engines<F: Fabric, H: EngineHandler>(
    n: u16,
    handler: impl Fn(u16) -> Arc<H>,
    config: impl Fn(u16) -> EngineConfig,
) -> Vec<(Engine<F>, Arc<H>)> {
    let _ = env_logger::Builder::from_default_env().is_test(true).try_init();
    let nodes: Vec<(Engine<F>, Arc<H>)> = (0..n)
        .map(|i| {
            let h = handler(i);
            (Engine::<F>::start(config(i), h.clone()).expect("engine start"), h)
        })
        .collect();
    link(nodes.iter().map(|(e, _)| e));
    nodes
}

/// Adds every engine (node id = its position) to every other's node table.
pub fn link<'a, F: Fabric + 'a>(engines: impl Iterator<Item = &'a Engine<F>> + Clone) {
    let addrs: Vec<SocketAddr> = engines.clone().map(|e| e.manager().local_addr()).collect();
    for (i, e) in engines.enumerate() {
        for (j, a) in addrs.iter().enumerate() {
            if i != j {
                e.add_node(NodeId(j as u16), *a).unwrap();
            }
        }
    }
}

pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Bytes per stream of the long integrity tests: `IBDXNET_STREAM_MIB` MiB
/// if set (the Soft-RoCE VM emulates its CPUs and moves a few MB/s through
/// `sim`, so `./ibdxnet vm-test` sets it lower), else 256 MiB (16 in debug).
pub fn stream_bytes() -> u64 {
    let mib = std::env::var("IBDXNET_STREAM_MIB").ok().map(|v| {
        v.trim()
            .parse::<u64>()
            .ok()
            .filter(|&m| m > 0)
            .unwrap_or_else(|| panic!("IBDXNET_STREAM_MIB={v}: not a positive number"))
    });
    match mib {
        Some(m) => m << 20,
        None if cfg!(debug_assertions) => 16 << 20,
        None => 256 << 20,
    }
}

/// Connects every node to every other and streams `limit` bytes per pair.
pub fn all_to_all<F: Fabric>(nodes: &[Node<F>], limit: u64) -> Vec<Arc<Connection<F>>> {
    let mut held = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        for j in 0..nodes.len() {
            if i != j {
                let c = n.engine.connect(NodeId(j as u16)).expect("connect");
                // SAFETY: `c` (the connection of this ring) is kept for as long as the engine runs.
                unsafe { n.handler.add_target(NodeId(j as u16), c.ring().address(), c.ring().size()) };
                held.push(c);
            }
        }
    }
    for n in nodes {
        let t0 = Instant::now();
        while !n.handler.all_confirmed() {
            if t0.elapsed() > WAIT {
                panic!("not all confirmed: {:?} stats {:?}", n.handler.debug_state(), n.engine.stats());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        wait_until("all data received", || {
            n.handler.received.load(std::sync::atomic::Ordering::Relaxed) >= limit * (nodes.len() as u64 - 1)
        });
        let inc = n.handler.incoming();
        for j in 0..nodes.len() {
            if i != j {
                let s = &inc[&(j as u16)];
                assert_eq!(s.bytes, limit, "node {i} from {j}: bytes");
                assert_eq!(s.corrupt, 0, "node {i} from {j}: corrupt or reordered bytes");
            }
        }
    }
    held
}
