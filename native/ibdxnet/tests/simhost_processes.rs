//! `simhost` across processes: the test binary re-executes itself as the
//! peer (`SIMHOST_CHILD=1`, test `child_entry`), which obeys commands read
//! from its stdin and answers on its stdout (after an `@`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ibdxnet::fabric::simhost::{SimHostFabric, ENV_DIR, ENV_RING};
use ibdxnet::fabric::*;

const S: SendFlags = SendFlags::SIGNALED;
const CHILD_ENV: &str = "SIMHOST_CHILD";

fn spec() -> NodeSpec {
    NodeSpec { cqe: 8192, srq_wr: 1024, buf: 8 << 20, ..Default::default() }
}

fn ep_line(ep: &QpEndpoint) -> String {
    format!("EP {} {} {} {} {}", ep.qpn, ep.psn, ep.mtu, ep.sim_addr, ep.sim_network)
}

fn parse_ep(line: &str) -> QpEndpoint {
    let v: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
    QpEndpoint {
        qpn: v[0] as u32,
        psn: v[1] as u32,
        mtu: v[2] as u32,
        sim_addr: v[3],
        sim_network: v[4],
        ..Default::default()
    }
}

/// The bytes of stream message `seq`: its length and contents.
fn stream_msg(seq: u64) -> Vec<u8> {
    let len = 8 + (seq.wrapping_mul(7919) % 2040) as usize;
    let mut v = pattern(seq, len);
    v[..8].copy_from_slice(&seq.to_le_bytes());
    v
}

/// The peer process: opens a device in `$IBDXNET_SIMHOST_DIR`, prints its
/// endpoint, connects to the one it reads, then runs commands.
#[test]
fn child_entry() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let fabric = SimHostFabric::open(&FabricConfig::default()).expect("child: open simhost");
    let n = Node::new(fabric, spec());
    let mut out = std::io::stdout();
    writeln!(out, "@{}", ep_line(&n.qp.endpoint())).unwrap();
    out.flush().unwrap();
    let mut next_recv = 0u64;
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let w: Vec<&str> = line.split_whitespace().collect();
        let arg = |i: usize| w[i].parse::<u64>().unwrap();
        let reply = match w[0] {
            "EP" => {
                n.qp.connect(&parse_ep(&line)).unwrap();
                "connected".to_string()
            }
            // RECV n len: n receive requests of len bytes each.
            "RECV" => {
                let len = arg(2) as usize;
                let offs: Vec<[(usize, usize); 1]> =
                    (0..arg(1)).map(|i| [(((next_recv + i) % 1024) as usize * 4096, len)]).collect();
                let wrs: Vec<(u64, &[(usize, usize)])> =
                    offs.iter().enumerate().map(|(i, o)| (next_recv + i as u64, &o[..])).collect();
                n.post_recvs(&wrs);
                next_recv += arg(1);
                "posted".to_string()
            }
            // WAITRECV n: the next n receive completions, in order.
            "WAITRECV" => poll_n(&n.recv_cq, arg(1) as usize)
                .iter()
                .map(|c| {
                    let ok = c.status == WcStatus::Success;
                    let off = (c.wr_id % 1024) as usize * 4096;
                    let data = if ok { n.buf.read(off, c.byte_len as usize) } else { Vec::new() };
                    let good = !ok || data == pattern(u64::from(c.imm_data.unwrap_or(0)), data.len());
                    format!("{}:{}:{}:{:?}:{}", c.wr_id, c.status.to_raw(), c.byte_len, c.imm_data, good)
                })
                .collect::<Vec<_>>()
                .join(" "),
            // SEND n len imm: n sends of pattern(imm + i) with imm + i.
            "SEND" => {
                for i in 0..arg(1) {
                    let imm = arg(3) + i;
                    n.buf.write(4 << 20, &pattern(imm, arg(2) as usize));
                    n.post_sends(&[(imm, &[(4 << 20, arg(2) as usize)], Some(imm as u32), S)]).unwrap();
                    assert_eq!(poll_n(&n.send_cq, 1)[0].status, WcStatus::Success);
                }
                "sent".to_string()
            }
            "STATE" => format!("{:?}", n.qp.state()),
            "STREAM" => stream_receive(&n, arg(1)),
            // Streams both ways at once.
            "DUPLEX" => std::thread::scope(|sc| {
                sc.spawn(|| stream_send(&n, arg(1)));
                stream_receive(&n, arg(1))
            }),
            "EXIT" => return,
            other => panic!("child: unknown command {other}"),
        };
        writeln!(out, "@{reply}").unwrap();
        out.flush().unwrap();
    }
}

/// Receives `count` stream messages, reposting each request; checks order,
/// length and contents.
fn stream_receive(n: &Node<SimHostFabric>, count: u64) -> String {
    let slots = 512u64;
    let offs: Vec<[(usize, usize); 1]> = (0..slots).map(|i| [(i as usize * 4096, 4096)]).collect();
    let wrs: Vec<(u64, &[(usize, usize)])> = offs.iter().enumerate().map(|(i, o)| (i as u64, &o[..])).collect();
    n.post_recvs(&wrs);
    let mut want = 0u64;
    let mut batch = [WorkCompletion::default(); 64];
    let deadline = Instant::now() + WAIT * 4;
    while want < count {
        let got = n.recv_cq.poll(&mut batch).unwrap();
        if got == 0 {
            if Instant::now() > deadline {
                return format!("ERR timeout at {want}");
            }
            std::thread::yield_now();
            continue;
        }
        for c in &batch[..got] {
            let expect = stream_msg(want);
            let data = n.buf.read(c.wr_id as usize * 4096, c.byte_len as usize);
            if c.status != WcStatus::Success || c.imm_data != Some(want as u32) || data != expect {
                return format!("ERR at {want}: {c:?}");
            }
            want += 1;
            n.post_recvs(&[(c.wr_id, &offs[c.wr_id as usize][..])]);
        }
    }
    format!("OK {want}")
}

/// Sends `count` stream messages (every 8th signalled), as fast as the send
/// queue allows; checks that they all complete successfully, in order.
fn stream_send(a: &Node<SimHostFabric>, count: u64) {
    let depth = a.qp.caps().max_send_wr as u64;
    let slots = 64u64; // staging slots in the buffer's last MiB, reused after completion
    let base = 7 << 20;
    let (mut posted, mut done) = (0u64, 0u64);
    let mut batch = [WorkCompletion::default(); 64];
    let t0 = Instant::now();
    while done < count {
        while posted < count && posted - done < depth.min(slots) {
            let m = stream_msg(posted);
            let off = base + (posted % slots) as usize * 4096;
            a.buf.write(off, &m);
            // Every 8th signalled: the others' slots come free with it.
            let flags = if posted % 8 == 7 || posted == count - 1 { S } else { SendFlags::NONE };
            a.post_sends(&[(posted, &[(off, m.len())], Some(posted as u32), flags)]).unwrap();
            posted += 1;
        }
        let got = a.send_cq.poll(&mut batch).unwrap();
        for c in &batch[..got] {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
            assert!(c.wr_id >= done, "completion {c:?} out of order");
            done = c.wr_id + 1;
        }
        if got == 0 {
            assert!(t0.elapsed() < WAIT * 4, "only {done} of {count} sends completed");
            std::thread::yield_now();
        }
    }
}

/// The peer process, as the parent drives it.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    /// Starts the peer and connects `node` with it (both ways).
    fn start(node: &Node<SimHostFabric>) -> Peer {
        Peer::start_with_ring(node, 0)
    }

    /// As `start`, the peer's ring `ring` bytes (0: the default).
    fn start_with_ring(node: &Node<SimHostFabric>, ring: u32) -> Peer {
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new(exe)
            .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .env(ENV_RING, if ring == 0 { String::new() } else { ring.to_string() })
            .env(ENV_DIR, node.fabric.dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut p = Peer { child, stdin, stdout };
        let ep = parse_ep(&p.answer());
        node.qp.connect(&ep).unwrap();
        assert_eq!(p.cmd(&ep_line(&node.qp.endpoint())), "connected");
        p
    }

    /// The next answer line (without its `@`).
    fn answer(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "the peer process ended");
            // libtest may have printed "test child_entry ... " before it.
            if let Some(at) = line.find('@') {
                return line[at + 1..].trim_end().to_string();
            }
        }
    }

    /// Sends a command, returns its answer.
    fn cmd(&mut self, c: &str) -> String {
        writeln!(self.stdin, "{c}").unwrap();
        self.stdin.flush().unwrap();
        self.answer()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "EXIT");
        let _ = self.stdin.flush();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn node() -> Node<SimHostFabric> {
    node_with_ring(0)
}

fn node_with_ring(ring_bytes: u32) -> Node<SimHostFabric> {
    let cfg =
        FabricConfig { simhost: SimHostOptions { dir: Some(simhost_test_dir()), ring_bytes }, ..Default::default() };
    Node::new(SimHostFabric::open(&cfg).unwrap(), spec())
}

#[test]
fn a_message_each_way_with_immediate_data() {
    let a = node();
    let mut b = Peer::start(&a);
    assert_eq!(b.cmd("RECV 1 4096"), "posted");
    a.buf.write(0, &pattern(0xABC, 1000));
    a.post_sends(&[(1, &[(0, 1000)], Some(0xABC), S)]).unwrap();
    assert_eq!(poll_n(&a.send_cq, 1)[0].status, WcStatus::Success);
    assert_eq!(b.cmd("WAITRECV 1"), "0:0:1000:Some(2748):true");
    // And back.
    a.post_recvs(&[(7, &[(4096, 4096)])]);
    assert_eq!(b.cmd("SEND 1 3000 77"), "sent");
    let r = poll_n(&a.recv_cq, 1)[0];
    assert_eq!((r.wr_id, r.status, r.byte_len, r.imm_data), (7, WcStatus::Success, 3000, Some(77)));
    assert_eq!(a.buf.read(4096, 3000), pattern(77, 3000));
}

#[test]
fn empty_srq_holds_messages_in_order_until_receives_are_posted() {
    let a = node();
    let mut b = Peer::start(&a);
    for i in 0..4u64 {
        a.buf.write(i as usize * 512, &pattern(100 + i, 300));
    }
    let sges: Vec<[(usize, usize); 1]> = (0..4).map(|i| [(i * 512, 300)]).collect();
    let wrs: Vec<_> = (0..4u64).map(|i| (i, &sges[i as usize][..], Some(100 + i as u32), S)).collect();
    a.post_sends(&wrs).unwrap();
    // Receiver not ready: nothing completes, however long we wait.
    assert!(poll_for(&a.send_cq, Duration::from_millis(300)).is_empty());
    assert_eq!(b.cmd("RECV 1 4096"), "posted");
    assert_eq!(b.cmd("WAITRECV 1"), "0:0:300:Some(100):true");
    assert_eq!(poll_n(&a.send_cq, 1)[0].wr_id, 0);
    assert!(poll_for(&a.send_cq, Duration::from_millis(100)).is_empty(), "only one receive was posted");
    assert_eq!(b.cmd("RECV 3 4096"), "posted");
    assert_eq!(b.cmd("WAITRECV 3"), "1:0:300:Some(101):true 2:0:300:Some(102):true 3:0:300:Some(103):true");
    let s = poll_n(&a.send_cq, 3);
    assert_eq!(
        s.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        (1..4).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
}

#[test]
fn receive_too_small_fails_both_sides() {
    let a = node();
    let mut b = Peer::start(&a);
    assert_eq!(b.cmd("RECV 1 16"), "posted");
    a.post_sends(&[(1, &[(0, 64)], Some(5), S), (2, &[(0, 8)], None, S)]).unwrap();
    let s = poll_n(&a.send_cq, 2);
    assert_eq!((s[0].wr_id, s[0].status), (1, WcStatus::RemInvReqErr), "{s:?}");
    assert_eq!((s[1].wr_id, s[1].status), (2, WcStatus::WrFlushErr), "{s:?}");
    assert_eq!(a.qp.state(), QpState::Error);
    assert_eq!(b.cmd("WAITRECV 1"), format!("0:{}:0:Some(5):true", WcStatus::LocLenErr.to_raw()));
    assert_eq!(b.cmd("STATE"), "Error");
}

#[test]
fn a_killed_peer_fails_the_pending_send_with_retry_exceeded() {
    let a = node();
    let mut b = Peer::start(&a);
    // The peer has no receive requests: both sends stay pending.
    a.post_sends(&[(1, &[(0, 64)], None, S), (2, &[(0, 64)], None, S)]).unwrap();
    assert!(poll_for(&a.send_cq, Duration::from_millis(200)).is_empty());
    b.child.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    b.child.wait().unwrap();
    let s = poll_n(&a.send_cq, 2);
    let took = killed.elapsed();
    assert_eq!((s[0].wr_id, s[0].status), (1, WcStatus::RetryExcErr), "{s:?}");
    assert_eq!((s[1].wr_id, s[1].status), (2, WcStatus::WrFlushErr), "{s:?}");
    assert!(took < Duration::from_secs(1), "death noticed after {took:?}");
    eprintln!("a killed peer noticed after {took:?}");
    assert_eq!(a.qp.state(), QpState::Error);
    // New sends fail too.
    a.post_sends(&[(3, &[(0, 8)], None, S)]).unwrap();
    assert_eq!(poll_n(&a.send_cq, 1)[0].status, WcStatus::WrFlushErr);
}

#[test]
fn a_stream_of_many_messages_arrives_without_loss_duplication_or_reordering() {
    let count = 120_000u64;
    let a = node();
    let mut b = Peer::start(&a);
    writeln!(b.stdin, "STREAM {count}").unwrap();
    b.stdin.flush().unwrap();
    let t0 = Instant::now();
    stream_send(&a, count);
    assert_eq!(b.answer(), format!("OK {count}"));
    eprintln!("{count} messages in {:?}", t0.elapsed());
}

#[test]
fn streams_both_ways_at_once() {
    let count = 50_000u64;
    let a = node();
    let mut b = Peer::start(&a);
    writeln!(b.stdin, "DUPLEX {count}").unwrap();
    b.stdin.flush().unwrap();
    let t0 = Instant::now();
    let got = std::thread::scope(|sc| {
        sc.spawn(|| stream_send(&a, count));
        stream_receive(&a, count)
    });
    assert_eq!(got, format!("OK {count}"));
    assert_eq!(b.answer(), format!("OK {count}"));
    eprintln!("{count} messages each way in {:?}", t0.elapsed());
}

/// Rings of 8 KiB: messages of up to 2 KiB are often split, the rings are
/// full most of the time, both ways.
#[test]
fn streams_both_ways_through_small_rings() {
    let count = 30_000u64;
    let a = node_with_ring(8192);
    let mut b = Peer::start_with_ring(&a, 8192);
    writeln!(b.stdin, "DUPLEX {count}").unwrap();
    b.stdin.flush().unwrap();
    let got = std::thread::scope(|sc| {
        sc.spawn(|| stream_send(&a, count));
        stream_receive(&a, count)
    });
    assert_eq!(got, format!("OK {count}"));
    assert_eq!(b.answer(), format!("OK {count}"));
}

#[test]
fn a_message_larger_than_the_ring_arrives_in_fragments() {
    let a = node();
    let mut b = Peer::start(&a);
    let len = 3 << 20; // three times the default ring of 1 MiB
    assert_eq!(b.cmd(&format!("RECV 1 {len}")), "posted");
    a.buf.write(0, &pattern(9, len));
    // Over two SGEs, with a small message behind it.
    a.post_sends(&[(1, &[(0, len / 3), (len / 3, len - len / 3)], Some(9), S), (2, &[(0, 0)], Some(10), S)]).unwrap();
    assert_eq!(b.cmd("WAITRECV 1"), format!("0:0:{len}:Some(9):true"));
    assert_eq!(b.cmd("RECV 1 64"), "posted");
    assert_eq!(b.cmd("WAITRECV 1"), "1:0:0:Some(10):true");
    let s = poll_n(&a.send_cq, 2);
    assert_eq!(
        s.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}
