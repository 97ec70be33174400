//! The msgrc engine on `simhost`: two nodes in one process, and two nodes in
//! two processes (the test binary re-executed as node 1 with
//! `SIMHOST_ENGINE_CHILD=1`), connected over UDP on 127.0.0.1, streaming
//! both ways with integrity and order checks.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use common::engine::{all_to_all, base_config, start_nodes, wait_until, Node, WAIT};
use common::simhost_test_dir;
use ibdxnet::con::{NodeEvent, NodeId};
use ibdxnet::fabric::simhost::{SimHostFabric, ENV_DIR};
use ibdxnet::fabric::FabricKind;
use ibdxnet::loopback::{StreamHandler, StreamOptions};
use ibdxnet::msgrc::{Engine, EngineConfig};

const CHILD_ENV: &str = "SIMHOST_ENGINE_CHILD";
const LIMIT: u64 = 32 << 20;

fn config(id: u16) -> EngineConfig {
    let mut c = base_config(id, FabricKind::SimHost);
    c.device.simhost.dir = Some(simhost_test_dir());
    c
}

fn verified() -> StreamOptions {
    StreamOptions { verify: true, limit: Some(LIMIT), ..Default::default() }
}

#[test]
fn two_nodes_of_one_process_stream_both_ways() {
    let nodes = start_nodes::<SimHostFabric>(2, verified(), config);
    let _held = all_to_all(&nodes, LIMIT);
    for n in &nodes {
        assert_eq!(n.engine.stats().errors.load(Relaxed), 0);
    }
}

/// One node of the two-process test: streams `LIMIT` bytes to `peer` and
/// waits for as many from it; returns (bytes, corrupt) received.
fn stream_with(node: &Node<SimHostFabric>, peer: NodeId, addr: SocketAddr) -> (u64, u64) {
    node.engine.add_node(peer, addr).unwrap();
    let c = node.engine.connect(peer).expect("connect");
    // SAFETY: `c` (the connection of this ring) is kept until we return,
    // and the engine is shut down by the caller after.
    unsafe { node.handler.add_target(peer, c.ring().address(), c.ring().size()) };
    wait_until("all data received", || node.handler.received.load(Relaxed) >= LIMIT);
    wait_until("all sent data confirmed", || node.handler.all_confirmed());
    let s = &node.handler.incoming()[&peer.0];
    (s.bytes, s.corrupt)
}

fn start_one(id: u16, opts: StreamOptions) -> Node<SimHostFabric> {
    let handler = StreamHandler::new(NodeId(id), opts);
    let mut c = base_config(id, FabricKind::SimHost);
    // The child finds the directory in $IBDXNET_SIMHOST_DIR.
    c.device.simhost.dir = std::env::var_os(CHILD_ENV).is_none().then(simhost_test_dir);
    let engine = Engine::<SimHostFabric>::start(c, handler.clone()).expect("engine start");
    handler.set_pool(engine.buffer_pool());
    Node { engine, handler }
}

#[test]
fn engine_child_entry() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let endless = std::env::var(CHILD_ENV).is_ok_and(|v| v == "endless");
    let node = start_one(1, if endless { StreamOptions { limit: None, ..verified() } } else { verified() });
    let mut out = std::io::stdout();
    writeln!(out, "@{}", node.engine.manager().local_addr()).unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    if endless {
        // Streams to node 0 until killed.
        let peer = NodeId(0);
        node.engine.add_node(peer, line.trim().parse().unwrap()).unwrap();
        let c = node.engine.connect(peer).expect("connect");
        // SAFETY: `c` is kept until the process is killed.
        unsafe { node.handler.add_target(peer, c.ring().address(), c.ring().size()) };
        writeln!(out, "@streaming").unwrap();
        out.flush().unwrap();
        std::thread::sleep(WAIT);
        return;
    }
    let (bytes, corrupt) = stream_with(&node, NodeId(0), line.trim().parse().unwrap());
    writeln!(out, "@{bytes} {corrupt} {}", node.engine.stats().errors.load(Relaxed)).unwrap();
    out.flush().unwrap();
    // Stay until the parent has everything too.
    line.clear();
    let _ = std::io::stdin().lock().read_line(&mut line);
}

/// Node 1 in a child process (`mode`: `1` or `endless`), its stdin, and a
/// reader of its answers.
fn spawn_child(mode: &str) -> (Child, ChildStdin, impl FnMut() -> String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "engine_child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .env(ENV_DIR, simhost_test_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let answer = move || {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "the child ended");
            if let Some(at) = line.find('@') {
                return line[at + 1..].trim().to_string();
            }
        }
    };
    (child, stdin, answer)
}

#[test]
fn two_nodes_in_two_processes_stream_both_ways() {
    let node = start_one(0, verified());
    let (mut child, mut stdin, mut answer) = spawn_child("1");
    let child_addr: SocketAddr = answer().parse().unwrap();
    writeln!(stdin, "{}", node.engine.manager().local_addr()).unwrap();
    stdin.flush().unwrap();
    let t0 = Instant::now();
    let (bytes, corrupt) = stream_with(&node, NodeId(1), child_addr);
    assert_eq!((bytes, corrupt), (LIMIT, 0), "node 0 from node 1");
    assert_eq!(answer(), format!("{LIMIT} 0 0"), "node 1 from node 0: bytes, corrupt, errors");
    assert!(t0.elapsed() < WAIT);
    eprintln!("{} MiB each way between two processes in {:?}", LIMIT >> 20, t0.elapsed());
    assert_eq!(node.engine.stats().errors.load(Relaxed), 0);
    writeln!(stdin, "done").unwrap();
    stdin.flush().unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_killed_node_process_is_reported_disconnected() {
    let node = start_one(0, StreamOptions { limit: None, ..verified() });
    let (mut child, mut stdin, mut answer) = spawn_child("endless");
    let child_addr: SocketAddr = answer().parse().unwrap();
    let peer = NodeId(1);
    node.engine.add_node(peer, child_addr).unwrap();
    writeln!(stdin, "{}", node.engine.manager().local_addr()).unwrap();
    stdin.flush().unwrap();
    assert_eq!(answer(), "streaming");
    let c = node.engine.connect(peer).expect("connect");
    // SAFETY: `c` is kept until the end of the test, after the engine stopped sending.
    unsafe { node.handler.add_target(peer, c.ring().address(), c.ring().size()) };
    let from_child = || node.handler.incoming().get(&1).map_or(0, |s| s.bytes);
    wait_until("traffic from the child", || from_child() > (4 << 20));
    child.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    child.wait().unwrap();
    wait_until("node 1 reported disconnected", || node.handler.events().contains(&NodeEvent::Disconnected(peer)));
    let took = killed.elapsed();
    eprintln!("the killed node was reported disconnected after {took:?}");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    assert_eq!(node.handler.incoming()[&1].corrupt, 0);
    node.handler.stop_sending();
    drop(c);
}
