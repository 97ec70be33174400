//! Queue pairs of `simhost`: their state, posting, connecting.
//! What moves the data is in `wire.rs`.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use super::dir::{self, PeerDevice};
use super::queues::{CqCore, SimHostCq, SimHostSrq, SrqCore};
use super::ring::{Channel, ST_DESTROYED, ST_ERROR, ST_RESET, ST_RTS};
use super::Device;
use crate::fabric::simparts::{check_qp_create, check_remote, endpoint, prepare_send, Payload, PostedRecv};
use crate::fabric::{FabricError, PostError, QpCaps, QpEndpoint, QpState, QueuePair, SendBatch, SendFlags};
use crate::util::lock;

#[derive(Debug)]
pub(crate) struct Msg {
    pub seq: u64,
    pub wr_id: u64,
    pub signaled: bool,
    pub imm: Option<u32>,
    pub len: u64,
    pub payload: Payload,
}

/// A request in the ring, waiting for the consumer to pass `end`.
#[derive(Debug)]
pub(crate) struct Sent {
    pub seq: u64,
    pub wr_id: u64,
    pub signaled: bool,
    pub end: u64,
}

/// The receive request a message is being placed into.
#[derive(Debug)]
pub(crate) struct RxCur {
    pub recv: PostedRecv,
    pub seq: u64,
    pub total: u32,
    pub filled: u32,
    pub imm: Option<u32>,
}

/// Everything of a queue pair that changes, under one lock.
#[derive(Debug, Default)]
pub(crate) struct Inner {
    /// (device address, qpn) connected to.
    pub remote: Option<(u64, u32)>,
    pub peer_dev: Option<Arc<PeerDevice>>,
    /// The peer's channel file, which we produce into.
    pub link: Option<Channel>,
    /// Since when the head request waits for the peer to connect.
    pub wait_since: Option<Instant>,
    /// When the peer's liveness was last checked.
    pub last_check: Option<Instant>,
    pub queue: VecDeque<Msg>,
    /// Bytes of `queue.front()` already in the ring.
    pub front_off: u64,
    pub inflight: VecDeque<Sent>,
    pub next_seq: u64,
    /// Successful unsignalled requests whose slots the next completion frees.
    pub unsignaled: u32,
    pub rx: Option<RxCur>,
}

/// The shared part of a queue pair.
#[derive(Debug)]
pub(crate) struct QpCore {
    pub me: Weak<QpCore>,
    pub dev: Arc<Device>,
    pub qpn: u32,
    psn: u32,
    pub caps: QpCaps,
    pub send_cq: Arc<CqCore>,
    pub recv_cq: Arc<CqCore>,
    pub srq: Arc<SrqCore>,
    /// Our channel file: the peer writes, we consume; holds our state.
    pub inbound: Channel,
    path: PathBuf,
    /// Send queue slots in use (posted, completion not yet polled).
    pub sq_outstanding: AtomicU32,
    pub inner: Mutex<Inner>,
}

impl QpCore {
    /// The state as published in the channel file.
    pub fn raw_state(&self) -> u32 {
        self.inbound.hdr().control.state.load(Ordering::Acquire)
    }

    pub fn set_state(&self, st: u32) {
        self.inbound.hdr().control.state.store(st, Ordering::Release);
    }
}

/// A queue pair of `simhost`.
#[derive(Debug)]
pub struct SimHostQp(pub(crate) Arc<QpCore>);

impl SimHostQp {
    pub(crate) fn new(
        dev: Arc<Device>,
        send_cq: &SimHostCq,
        recv_cq: &SimHostCq,
        srq: &SimHostSrq,
        caps: QpCaps,
    ) -> Result<SimHostQp, FabricError> {
        let info = &dev.info;
        let parts = [("send cq", &send_cq.0.dev), ("recv cq", &recv_cq.0.dev), ("srq", &srq.0.dev)];
        check_qp_create(&dev, &caps, super::SIMHOST_MAX_INLINE, info, parts)?;
        let qpn = dev.next_qpn.fetch_add(1, Ordering::Relaxed) & 0x00FF_FFFF;
        let path = dir::qp_path(&dev.dir, info.sim_addr, qpn);
        let unavailable =
            |e: std::io::Error| FabricError::Unavailable(format!("simhost channel {}: {e}", path.display()));
        let mut inbound = None;
        let file = dir::create_named(&path, 0, |f| {
            inbound = Some(Channel::map(f, Some((dev.ring_bytes, info.sim_addr, qpn)))?);
            Ok(())
        })
        .map_err(unavailable)?;
        drop(file);
        let inbound = inbound.expect("mapped while created");
        let core = Arc::new_cyclic(|me| QpCore {
            me: me.clone(),
            dev: dev.clone(),
            qpn,
            psn: crate::util::random_u32() & 0x00FF_FFFF,
            caps,
            send_cq: send_cq.0.clone(),
            recv_cq: recv_cq.0.clone(),
            srq: srq.0.clone(),
            inbound,
            path,
            sq_outstanding: AtomicU32::new(0),
            inner: Mutex::new(Inner::default()),
        });
        lock(&dev.qps).insert(qpn, Arc::downgrade(&core));
        Ok(SimHostQp(core))
    }

    fn post_one(&self, batch: &SendBatch, index: usize, seq: u64) -> Result<Msg, FabricError> {
        let q = &self.0;
        let wr = &batch.wrs()[index];
        // SAFETY: post_send's contract: the SGEs' memory is readable for
        // their length at post time.
        let (len, payload) = unsafe {
            prepare_send(batch, index, &q.caps, &q.sq_outstanding, |s| q.dev.check_range(s.lkey, s.addr, s.length))?
        };
        Ok(Msg { seq, wr_id: wr.wr_id, signaled: wr.flags.contains(SendFlags::SIGNALED), imm: wr.imm, len, payload })
    }
}

impl QueuePair for SimHostQp {
    fn qp_num(&self) -> u32 {
        self.0.qpn
    }

    fn endpoint(&self) -> QpEndpoint {
        endpoint(&self.0.dev.info, self.0.qpn, self.0.psn)
    }

    fn caps(&self) -> QpCaps {
        self.0.caps
    }

    fn state(&self) -> QpState {
        match self.0.raw_state() {
            ST_RESET => QpState::Reset,
            ST_RTS => QpState::Rts,
            ST_ERROR => QpState::Error,
            _ => QpState::Other,
        }
    }

    fn connect(&self, remote: &QpEndpoint) -> Result<(), FabricError> {
        check_remote(&self.0.dev.info, remote, "remote endpoint has no simhost device address")?;
        let mut g = lock(&self.0.inner);
        if self.0.raw_state() != ST_RESET {
            return Err(FabricError::BadState(format!("connect needs RESET, QP {} is {:?}", self.0.qpn, self.state())));
        }
        g.remote = Some((remote.sim_addr, remote.qpn));
        let control = &self.0.inbound.hdr().control;
        control.remote_addr.store(remote.sim_addr, Ordering::Relaxed);
        control.remote_qpn.store(remote.qpn, Ordering::Relaxed);
        self.0.set_state(ST_RTS);
        g.peer_dev = self.0.dev.peer(remote.sim_addr);
        let peer = g.peer_dev.clone();
        drop(g);
        // Our wire thread starts consuming what the peer may have written;
        // the peer's sends that wait for us to connect may go on.
        self.0.dev.kick();
        if let Some(p) = peer {
            p.doorbell().ring();
        }
        Ok(())
    }

    fn set_error(&self) -> Result<(), FabricError> {
        // As on hardware: ERROR is reachable from every state but RESET.
        if self.0.raw_state() == ST_RESET {
            return Err(FabricError::Verbs { call: "ibv_modify_qp(ERR)", errno: libc::EINVAL });
        }
        let mut g = lock(&self.0.inner);
        self.0.set_state(ST_ERROR);
        self.0.progress_tx(&mut g, Instant::now());
        Ok(())
    }

    unsafe fn post_send(&self, batch: &SendBatch) -> Result<(), PostError> {
        let state = self.0.raw_state();
        if state != ST_RTS && state != ST_ERROR {
            let error = FabricError::Verbs { call: "ibv_post_send", errno: libc::EINVAL };
            return Err(PostError { posted: 0, error });
        }
        let mut result = Ok(());
        let mut g = lock(&self.0.inner);
        for i in 0..batch.len() {
            match self.post_one(batch, i, g.next_seq) {
                Ok(msg) => {
                    g.next_seq += 1;
                    g.queue.push_back(msg);
                }
                Err(error) => {
                    result = Err(PostError { posted: i, error });
                    break;
                }
            }
        }
        // What the ring has no room for now goes out from the wire thread.
        self.0.progress_tx(&mut g, Instant::now());
        result
    }
}

impl Drop for SimHostQp {
    fn drop(&mut self) {
        // Under the lock: what the wire thread consumed before is visible
        // to a sender that sees DESTROYED.
        let peer = {
            let g = lock(&self.0.inner);
            self.0.set_state(ST_DESTROYED);
            g.peer_dev.clone()
        };
        lock(&self.0.dev.qps).remove(&self.0.qpn);
        let _ = std::fs::remove_file(&self.0.path);
        // A sender waiting for us notices at once.
        if let Some(peer) = peer {
            peer.doorbell().ring();
        }
    }
}
