//! How connections end. Every close goes through [`ConManager::close_conn`]
//! with a [`CloseKind`] that says what goes on the wire, whether the queue
//! pair waits for the peer, and what the user hears.
//!
//! The orderly close has two phases (see [`crate::con::proto`]): we send
//! `Close` and post nothing more; once our work requests are all
//! acknowledged we send `Done`; the queue pair goes down when the peer's
//! `Done` has arrived too, or at the connect timeout. Recently finished
//! closes are remembered ([`RecentCloses`]) so a peer still waiting for our
//! `Done` is answered instead of running into its deadline.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{ConManager, JobState};
use crate::con::connection::{ConState, Connection};
use crate::con::event::NodeEvent;
use crate::con::node::NodeId;
use crate::con::proto::{Body, LEAVE_UNKNOWN};
use crate::fabric::{Fabric, QpState, QueuePair};
use crate::util::lock;

/// How many finished connections are remembered to answer a peer's late
/// `Close` (see [`RecentCloses`]).
const FINISHED_MEMORY: usize = 4096;

/// How often a close waiting for our work requests to be acknowledged
/// checks them (the job thread used to poll everything every 20 ms).
const CLOSE_POLL: Duration = Duration::from_millis(5);

/// How a connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CloseKind {
    /// Orderly, in two phases: `Close`, then `Done` once nothing of ours is
    /// in flight; the queue pair stays up until the peer's `Done` (or the
    /// connect timeout). Reported as [`NodeEvent::Closed`].
    Drain,
    /// Orderly, but our queue pair goes down now (a fresh one replaces it):
    /// `Close` and `Done` at once, so the peer need not wait for anything of
    /// ours. Reported as [`NodeEvent::Closed`].
    Replaced,
    /// Not orderly (a failure, a forced close, the node's removal, our
    /// shutdown): `Leave`, down now; the node must be discovered again.
    /// Reported as [`NodeEvent::Disconnected`].
    Abort,
    /// The peer's `Leave`: as [`CloseKind::Abort`], reported as
    /// [`NodeEvent::Left`] with what the peer said it handled.
    PeerLeft {
        /// See [`NodeEvent::Left`].
        handled: Option<u64>,
    },
}

impl CloseKind {
    /// A close on purpose, not a failure.
    fn orderly(self) -> bool {
        matches!(self, CloseKind::Drain | CloseKind::Replaced)
    }

    /// What the user hears if the connection was established.
    fn event(self, node: NodeId) -> NodeEvent {
        match self {
            CloseKind::Drain | CloseKind::Replaced => NodeEvent::Closed(node),
            CloseKind::Abort => NodeEvent::Disconnected(node),
            CloseKind::PeerLeft { handled } => NodeEvent::Left { node, handled },
        }
    }
}

/// A connection in the two-phase orderly close: its queue pair stays up
/// until our work requests are all acknowledged and the peer says the same
/// of its own.
pub(super) struct Closing<F: Fabric> {
    conn: Arc<Connection<F>>,
    /// Our `Done` went out: nothing of ours in flight, nothing more posted.
    done_sent: bool,
    /// The peer's `Done` arrived.
    peer_done: bool,
    /// When `Close` or `Done` was last sent (for retransmission).
    last_sent: Instant,
    /// When the queue pair goes down whatever the peer says.
    deadline: Instant,
}

impl<F: Fabric> Closing<F> {
    /// The close the peer's packet about its queue pair `peer_qpn` and our `local_qpn` is for.
    fn is_for(&self, node: NodeId, instance: u32, peer_qpn: u32, local_qpn: u32) -> bool {
        self.conn.node() == node && self.conn.is_peer(instance, peer_qpn) && self.conn.local_qpn() == local_qpn
    }
}

/// A connection that finished closing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FinishedClose {
    node: NodeId,
    peer_instance: u32,
    peer_qpn: u32,
    local_qpn: u32,
    /// How often a `Done` for it was answered with ours (see [`RecentCloses::answer_done`]).
    answers: u8,
}

/// A finished close answers a peer's `Done` with its own at most this often:
/// two finished closes would otherwise answer each other's answers forever
/// (a `Done` retransmitted just before the peer's arrived starts it).
const DONE_ANSWERS: u8 = 2;

/// The last [`FINISHED_MEMORY`] finished closes: a peer still in its
/// two-phase close (ours was forced, or our `Done` got lost) is answered
/// with `Done` instead of waiting for its deadline.
#[derive(Debug, Default)]
pub(super) struct RecentCloses(Mutex<VecDeque<FinishedClose>>);

impl RecentCloses {
    fn remember(&self, f: FinishedClose) {
        let mut q = lock(&self.0);
        if q.len() == FINISHED_MEMORY {
            q.pop_front();
        }
        q.push_back(f);
    }

    /// True if a `Done` from `node` for our finished queue pair `local_qpn`
    /// may be answered (counted; at most [`DONE_ANSWERS`] times). A close
    /// no longer remembered is answered.
    fn answer_done(&self, node: NodeId, local_qpn: u32) -> bool {
        let mut q = lock(&self.0);
        match q.iter_mut().rev().find(|f| f.node == node && f.local_qpn == local_qpn) {
            Some(f) if f.answers >= DONE_ANSWERS => false,
            Some(f) => {
                f.answers += 1;
                true
            }
            None => true,
        }
    }

    /// Our queue pair that was connected to queue pair `peer_qpn` of this
    /// instance of `node`, if it finished recently.
    fn local_qpn_for(&self, node: NodeId, peer_instance: u32, peer_qpn: u32) -> Option<u32> {
        let q = lock(&self.0);
        q.iter()
            .rev()
            .find(|f| f.node == node && f.peer_instance == peer_instance && f.peer_qpn == peer_qpn)
            .map(|f| f.local_qpn)
    }
}

impl<F: Fabric> ConManager<F> {
    /// Removes the connection to `node` from the table and closes it as
    /// `kind` says; reports the kind's event if it was established.
    pub(super) fn close_conn(&self, node: NodeId, kind: CloseKind, st: &mut JobState<F>) {
        let Some(c) = self.table.write().unwrap_or_else(|p| p.into_inner()).remove(&node) else { return };
        st.last_exchange.remove(&node);
        st.pending_since.remove(&node);
        let was_established = c.state() == ConState::Established;
        // From here the send thread posts nothing new on it (`begin_posting`).
        c.set_state(ConState::Closing);
        if c.peer_qpn() != 0 {
            let qpn = c.qp().qp_num();
            let body = if kind.orderly() { Body::Close { qpn } } else { self.leave(node, qpn) };
            self.send(node, body, &mut st.buf);
            if kind == CloseKind::Replaced {
                // Our queue pair goes down now: the peer need not wait for anything of ours.
                self.send(node, Body::Done { qpn, peer_qpn: c.peer_qpn() }, &mut st.buf);
            }
        }
        if kind != CloseKind::Drain || c.peer_qpn() == 0 {
            // Down now, or never connected: nothing to wait for on the wire.
            self.finish_close(&c);
        } else {
            let now = Instant::now();
            let deadline = now + self.cfg.connect_timeout;
            st.closing.push(Closing { conn: c, done_sent: false, peer_done: false, last_sent: now, deadline });
        }
        self.stats.closed.fetch_add(1, Ordering::Relaxed);
        if was_established {
            if !kind.orderly() {
                lock(&self.discovered).remove(&node);
            }
            (self.events)(kind.event(node));
        }
        self.notify();
    }

    /// Our `Leave` for queue pair `qpn` to `node`, with what we handled of
    /// its data if the application told us (see [`ConManager::set_handled_on_leave`]).
    fn leave(&self, node: NodeId, qpn: u32) -> Body {
        let handled = lock(&self.handled_on_leave).get(&node).filter(|e| e.0 == qpn).map_or(LEAVE_UNKNOWN, |e| e.1);
        Body::Leave { qpn, handled }
    }

    /// Takes the queue pair down and remembers the close.
    fn finish_close(&self, c: &Arc<Connection<F>>) {
        // A queue pair still in RESET (the peer never answered) has nothing
        // posted and cannot go to ERROR; it is just destroyed.
        let result = if c.qp().state() == QpState::Reset { Ok(()) } else { c.qp().set_error() };
        if let Err(e) = result {
            log::warn!("node {}: moving the queue pair to {} to ERROR failed: {e}", self.me, c.node());
        }
        c.set_state(ConState::Closed);
        self.qpns.retire(c.qp().qp_num(), c.node());
        if c.peer_qpn() != 0 {
            self.recent_closes.remember(FinishedClose {
                node: c.node(),
                peer_instance: c.peer_instance(),
                peer_qpn: c.peer_qpn(),
                local_qpn: c.local_qpn(),
                answers: 0,
            });
        }
    }

    /// The peer's `Close` (`kind` [`CloseKind::Drain`]) or `Leave`
    /// ([`CloseKind::PeerLeft`]) of its queue pair `qpn`.
    pub(super) fn handle_peer_close(
        &self,
        node: NodeId,
        instance: u32,
        qpn: u32,
        kind: CloseKind,
        st: &mut JobState<F>,
    ) {
        let orderly = kind.orderly();
        // Only the peer instance our queue pair is connected to can close it.
        let current =
            self.table.read().unwrap_or_else(|p| p.into_inner()).get(&node).is_some_and(|c| c.is_peer(instance, qpn));
        let closing = st.closing.iter().position(|e| e.conn.node() == node && e.conn.is_peer(instance, qpn));
        if current {
            // Close: the peer posts nothing more and keeps its queue pair
            // up until we say `Done`, so ours closes in two phases too:
            // what our send thread already posted still arrives.
            // Leave: the peer is gone.
            self.close_conn(node, kind, st);
        } else if let Some(i) = closing {
            // Both sides closed at once (Close), or the peer went away
            // during our close (Leave: no `Done` will come).
            if !orderly {
                let e = st.closing.swap_remove(i);
                self.finish_close(&e.conn);
            }
        } else if let Some(local) = self.recent_closes.local_qpn_for(node, instance, qpn).filter(|_| orderly) {
            // Ours is gone already (forced, or finished and our `Done` was
            // lost): the peer waits for our `Done`.
            self.send(node, Body::Done { qpn: local, peer_qpn: qpn }, &mut st.buf);
        } else {
            self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
            log::debug!("node {}: dropped close of qpn {qpn} from {node} (no such connection)", self.me);
        }
    }

    /// The peer's `Done` for its queue pair `qpn` connected to our `local_qpn`.
    pub(super) fn handle_done(&self, node: NodeId, instance: u32, qpn: u32, local_qpn: u32, st: &mut JobState<F>) {
        if let Some(e) = st.closing.iter_mut().find(|e| e.is_for(node, instance, qpn, local_qpn)) {
            e.peer_done = true; // `progress_closes`, right after this packet, finishes it if ours is sent
            return;
        }
        // Its queue pair is done (nothing in flight, nothing more posted),
        // whichever of ours it names: after crossed exchanges ours was
        // connected to it while it was connected to an older one of ours,
        // and its `Done` names that one (our close waited out its deadline).
        if let Some(e) = st.closing.iter_mut().find(|e| e.conn.node() == node && e.conn.is_peer(instance, qpn)) {
            e.peer_done = true;
            return;
        }
        let current = self
            .table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&node)
            .is_some_and(|c| c.is_peer(instance, qpn) && c.local_qpn() == local_qpn);
        if current {
            // Its `Close` was lost: `Done` implies it.
            self.close_conn(node, CloseKind::Drain, st);
            if let Some(e) = st.closing.last_mut() {
                e.peer_done = true;
            }
        } else if self.node_of_qpn(local_qpn).is_none() && self.recent_closes.answer_done(node, local_qpn) {
            // We finished this close already and our `Done` was lost: repeat it.
            self.send(node, Body::Done { qpn: local_qpn, peer_qpn: qpn }, &mut st.buf);
        } else {
            self.stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A restarted peer's old queue pairs are gone: their `Done` never
    /// comes, so our closes of them finish now.
    pub(super) fn finish_closes_of_old_instances(&self, node: NodeId, instance: u32, st: &mut JobState<F>) {
        st.closing.retain(|e| {
            let old = e.conn.node() == node && e.conn.peer_instance() != instance;
            if old {
                self.finish_close(&e.conn);
            }
            !old
        });
    }

    /// When [`ConManager::progress_closes`] next has something to do. Whether
    /// our work requests are all acknowledged is not a timer (the send thread
    /// sees it): while a close waits for that, it is checked every
    /// [`CLOSE_POLL`].
    pub(super) fn next_close_due(&self, st: &JobState<F>) -> Option<Instant> {
        st.closing
            .iter()
            .map(|e| {
                let step = if !e.done_sent {
                    Instant::now() + CLOSE_POLL
                } else if !e.peer_done {
                    e.last_sent + self.cfg.exchange_retry
                } else {
                    Instant::now()
                };
                step.min(e.deadline)
            })
            .min()
    }

    /// Advances the orderly closes: our `Done` once nothing of ours is in
    /// flight, retransmission while the peer has not answered, the queue
    /// pair down once both are done (or at the deadline).
    pub(super) fn progress_closes(&self, now: Instant, st: &mut JobState<F>) {
        let JobState { closing, buf, .. } = st;
        closing.retain_mut(|e| {
            let (node, qpn, peer_qpn) = (e.conn.node(), e.conn.local_qpn(), e.conn.peer_qpn());
            if !e.done_sent && e.conn.inflight() == 0 {
                e.done_sent = true;
                e.last_sent = now;
                self.send(node, Body::Done { qpn, peer_qpn }, buf);
            } else if !e.peer_done && now - e.last_sent >= self.cfg.exchange_retry {
                e.last_sent = now;
                self.send(node, if e.done_sent { Body::Done { qpn, peer_qpn } } else { Body::Close { qpn } }, buf);
            }
            if e.done_sent && e.peer_done {
                self.stats.closes_drained.fetch_add(1, Ordering::Relaxed);
                self.finish_close(&e.conn);
                return false;
            }
            if now >= e.deadline {
                log::warn!(
                    "node {}: orderly close of the connection to {node} unfinished after {:?} \
                     ({} work requests of ours in flight, peer {}); taking it down",
                    self.me,
                    self.cfg.connect_timeout,
                    e.conn.inflight(),
                    if e.peer_done { "done" } else { "silent" }
                );
                self.stats.closes_timed_out.fetch_add(1, Ordering::Relaxed);
                self.finish_close(&e.conn);
                return false;
            }
            true
        });
    }

    /// Repeats at once the close packets to `node` that a challenge may
    /// have stopped (we just answered it), instead of at the next retry.
    pub(super) fn resend_closes_to(&self, node: NodeId, now: Instant, st: &mut JobState<F>) {
        let JobState { closing, buf, .. } = st;
        for e in closing.iter_mut().filter(|e| e.conn.node() == node && !e.peer_done) {
            e.last_sent = now;
            let (qpn, peer_qpn) = (e.conn.local_qpn(), e.conn.peer_qpn());
            self.send(node, if e.done_sent { Body::Done { qpn, peer_qpn } } else { Body::Close { qpn } }, buf);
        }
    }

    /// At shutdown: closes everything without waiting for handles, and
    /// tells peers waiting for our `Done` that we are gone.
    pub(super) fn close_all(&self, st: &mut JobState<F>) {
        let all: Vec<NodeId> = self.table.read().unwrap_or_else(|p| p.into_inner()).keys().copied().collect();
        for node in all {
            self.close_conn(node, CloseKind::Abort, st);
        }
        for e in st.closing.drain(..) {
            // The peer waits for our `Done`: tell it we are gone instead.
            let body = self.leave(e.conn.node(), e.conn.local_qpn());
            self.send(e.conn.node(), body, &mut st.buf);
            // Connected queue pairs (they had a peer) go to ERROR; if one
            // does not, it is destroyed with the connection anyway.
            if let Err(e2) = e.conn.qp().set_error() {
                log::debug!("node {}: queue pair to {} not moved to ERROR at shutdown: {e2}", self.me, e.conn.node());
            }
            e.conn.set_state(ConState::Closed);
        }
    }
}
