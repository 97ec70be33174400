//! Harness of the fabric conformance suite: the same test bodies run against
//! `sim` and `verbs`. Verbs tests skip (with a visible message) when the
//! host has no RDMA device, unless `IBDXNET_REQUIRE_RDMA=1`, where they fail.
#![allow(dead_code)]

pub mod control;
pub mod engine;
pub mod rawudp;
pub mod records;
pub mod scenarios;

use std::time::{Duration, Instant};

use ibdxnet::fabric::sim::{SimFabric, SimNetwork};
use ibdxnet::fabric::simhost::SimHostFabric;
use ibdxnet::fabric::verbs::{self, VerbsFabric};
use ibdxnet::fabric::*;

/// Upper bound for anything a test waits for (the VM is slow).
pub const WAIT: Duration = Duration::from_secs(30);

/// A fabric the suite can run on.
pub trait TestFabric: Fabric {
    /// Two devices that can reach each other, or `None` to skip.
    fn open_two(test: &str) -> Option<(Self, Self)>;
    /// Config for one more device next to `like` (same network / device).
    fn config_like(like: &Self) -> FabricConfig;
}

impl TestFabric for SimFabric {
    fn open_two(_test: &str) -> Option<(Self, Self)> {
        let net = SimNetwork::new();
        let cfg = FabricConfig { sim: SimOptions { network: Some(net), ..Default::default() }, ..Default::default() };
        Some((SimFabric::open(&cfg).unwrap(), SimFabric::open(&cfg).unwrap()))
    }
    fn config_like(like: &Self) -> FabricConfig {
        FabricConfig {
            sim: SimOptions { network: Some(like.network().clone()), ..Default::default() },
            ..Default::default()
        }
    }
}

/// The device directory of the `simhost` tests (shared by the test
/// processes; dead devices are swept when one opens).
pub fn simhost_test_dir() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    base.join("ibdxnet-simhost-tests")
}

impl TestFabric for SimHostFabric {
    fn open_two(_test: &str) -> Option<(Self, Self)> {
        let cfg = FabricConfig {
            simhost: SimHostOptions { dir: Some(simhost_test_dir()), ..Default::default() },
            ..Default::default()
        };
        Some((SimHostFabric::open(&cfg).unwrap(), SimHostFabric::open(&cfg).unwrap()))
    }
    fn config_like(like: &Self) -> FabricConfig {
        FabricConfig {
            simhost: SimHostOptions { dir: Some(like.dir().to_path_buf()), ..Default::default() },
            ..Default::default()
        }
    }
}

/// True if the environment demands a real RDMA device.
pub fn rdma_required() -> bool {
    std::env::var("IBDXNET_REQUIRE_RDMA").is_ok_and(|v| v == "1")
}

/// Writes straight to file descriptor 2, which the test harness's output
/// capture does not intercept, so skips are visible in every run.
pub fn skip_notice(msg: &str) {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    // SAFETY: fd 2 is open for the whole process; ManuallyDrop keeps it open.
    let mut err = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(2) });
    let _ = err.write_all(msg.as_bytes());
}

/// The device config for verbs tests: `IBDXNET_DEVICE` or the first device.
pub fn verbs_config() -> FabricConfig {
    FabricConfig { device: std::env::var("IBDXNET_DEVICE").ok().filter(|s| !s.is_empty()), ..Default::default() }
}

impl TestFabric for VerbsFabric {
    fn open_two(test: &str) -> Option<(Self, Self)> {
        let devices = verbs::device_names().unwrap_or_default();
        if devices.is_empty() {
            assert!(!rdma_required(), "IBDXNET_REQUIRE_RDMA=1 but this host has no RDMA device ({test})");
            skip_notice(&format!(
                "SKIPPED verbs::{test}: no RDMA device on this host (set IBDXNET_REQUIRE_RDMA=1 to fail instead)\n"
            ));
            return None;
        }
        let cfg = verbs_config();
        let a = VerbsFabric::open(&cfg).unwrap_or_else(|e| panic!("open verbs device: {e}"));
        let b = VerbsFabric::open(&cfg).unwrap_or_else(|e| panic!("open verbs device: {e}"));
        Some((a, b))
    }
    fn config_like(_like: &Self) -> FabricConfig {
        verbs_config()
    }
}

/// Registered, heap-allocated memory.
pub struct Buf<F: Fabric> {
    // Field order = drop order: deregister before freeing.
    pub mr: F::Mr,
    pub mem: Box<[u8]>,
}

impl<F: Fabric> Buf<F> {
    pub fn new(f: &F, len: usize) -> Self {
        let mut mem = vec![0u8; len].into_boxed_slice();
        // SAFETY: `mem` lives in the same struct as `mr` and is dropped after it
        // (field order); tests read it only after the completions were polled.
        let mr = unsafe { f.register(mem.as_mut_ptr(), len) }.expect("register");
        Buf { mr, mem }
    }
    pub fn sge(&self, offset: usize, len: usize) -> Sge {
        self.mr.sge(offset, len as u32)
    }
    pub fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        // SAFETY: the fabric may write the buffer from other threads; read it
        // through a raw pointer (no Rust reference held across the write).
        unsafe { std::slice::from_raw_parts(self.mr.addr().add(offset), len).to_vec() }
    }
    pub fn write(&self, offset: usize, data: &[u8]) {
        // SAFETY: as in `read`; tests write only areas no posted request covers.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.mr.addr().add(offset), data.len()) }
    }
}

/// One side of a connection: its queues, a queue pair and a buffer.
pub struct Node<F: Fabric> {
    pub send_cq: F::Cq,
    pub recv_cq: F::Cq,
    pub srq: F::Srq,
    pub qp: F::Qp,
    pub buf: Buf<F>,
    pub fabric: F,
}

/// Sizes of a test node.
#[derive(Clone, Copy)]
pub struct NodeSpec {
    pub cqe: u32,
    pub srq_wr: u32,
    pub srq_sge: u32,
    pub caps: QpCaps,
    pub buf: usize,
}

impl Default for NodeSpec {
    fn default() -> Self {
        NodeSpec {
            cqe: 1024,
            srq_wr: 256,
            srq_sge: 4,
            caps: QpCaps { max_send_wr: 128, max_send_sge: 4, max_inline_data: 0 },
            buf: 1 << 20,
        }
    }
}

impl<F: Fabric> Node<F> {
    pub fn new(fabric: F, spec: NodeSpec) -> Self {
        let send_cq = fabric.create_cq(spec.cqe).expect("create send cq");
        let recv_cq = fabric.create_cq(spec.cqe).expect("create recv cq");
        let srq = fabric.create_srq(spec.srq_wr, spec.srq_sge).expect("create srq");
        let qp = fabric.create_qp(&send_cq, &recv_cq, &srq, spec.caps).expect("create qp");
        let buf = Buf::new(&fabric, spec.buf);
        Node { send_cq, recv_cq, srq, qp, buf, fabric }
    }

    /// Posts one receive request per entry of `wrs`: (wr_id, [(offset, len)]).
    pub fn post_recvs(&self, wrs: &[(u64, &[(usize, usize)])]) {
        let mut b = RecvBatch::default();
        for (id, sges) in wrs {
            let s: Vec<Sge> = sges.iter().map(|&(o, l)| self.buf.sge(o, l)).collect();
            b.push(*id, &s);
        }
        // SAFETY: SGEs lie in `self.buf`, alive as long as the node.
        unsafe { self.srq.post_recv(&b) }.expect("post_srq_recv");
    }

    /// Posts a chain of sends: (wr_id, [(offset, len)], imm, flags).
    pub fn post_sends(&self, wrs: &[TestSend<'_>]) -> Result<(), PostError> {
        let mut b = SendBatch::default();
        for (id, sges, imm, flags) in wrs {
            let s: Vec<Sge> = sges.iter().map(|&(o, l)| self.buf.sge(o, l)).collect();
            b.push(*id, &s, *imm, *flags);
        }
        // SAFETY: SGEs lie in `self.buf`, alive as long as the node.
        unsafe { self.qp.post_send(&b) }
    }
}

/// A test send request: (wr_id, [(offset, len)], imm, flags).
pub type TestSend<'a> = (u64, &'a [(usize, usize)], Option<u32>, SendFlags);

/// Two connected nodes.
pub fn connected_pair<F: TestFabric>(test: &str, spec: NodeSpec) -> Option<(Node<F>, Node<F>)> {
    let (fa, fb) = F::open_two(test)?;
    let a = Node::new(fa, spec);
    let b = Node::new(fb, spec);
    a.qp.connect(&b.qp.endpoint()).expect("connect a→b");
    b.qp.connect(&a.qp.endpoint()).expect("connect b→a");
    Some((a, b))
}

/// Polls `cq` until `n` completions arrived; panics after [`WAIT`].
pub fn poll_n<C: CompletionQueue>(cq: &C, n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::with_capacity(n);
    let mut batch = [WorkCompletion::default(); 16];
    let deadline = Instant::now() + WAIT;
    while out.len() < n {
        let want = (n - out.len()).min(batch.len());
        let got = cq.poll(&mut batch[..want]).expect("poll_cq");
        out.extend_from_slice(&batch[..got]);
        if got == 0 {
            assert!(Instant::now() < deadline, "only {} of {n} completions after {WAIT:?}: {out:?}", out.len());
            std::thread::yield_now();
        }
    }
    out
}

/// Polls `cq` for `dur` and returns whatever arrived.
pub fn poll_for<C: CompletionQueue>(cq: &C, dur: Duration) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut batch = [WorkCompletion::default(); 16];
    let end = Instant::now() + dur;
    while Instant::now() < end {
        let got = cq.poll(&mut batch).expect("poll_cq");
        out.extend_from_slice(&batch[..got]);
        std::thread::yield_now();
    }
    out
}

/// Deterministic test bytes.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Instantiates each generic test for `sim`, `verbs` and `simhost`.
#[macro_export]
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sim {
            $(#[test] fn $name() { super::$name::<ibdxnet::fabric::sim::SimFabric>(stringify!($name)); })*
        }
        mod verbs {
            $(#[test] fn $name() { super::$name::<ibdxnet::fabric::verbs::VerbsFabric>(stringify!($name)); })*
        }
        mod simhost {
            $(#[test] fn $name() {
                super::$name::<ibdxnet::fabric::simhost::SimHostFabric>(stringify!($name));
            })*
        }
    };
}
