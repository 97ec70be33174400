//! The job thread's loop: jobs from other threads, UDP packets, and the
//! timers (exchange retransmission, close phases, discovery rounds).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::close::{CloseKind, Closing};
use super::discovery;
use super::job::Job;
use super::{ConManager, MAX_SLEEP};
use crate::con::event::NodeEvent;
use crate::con::node::NodeId;
use crate::con::proto::{Body, MAX_PACKET};
use crate::fabric::Fabric;
use crate::util::lock;

/// State only the job thread touches.
pub(super) struct JobState<F: Fabric> {
    pub(super) last_exchange: HashMap<NodeId, Instant>,
    pub(super) pending_since: HashMap<NodeId, Instant>,
    /// Orderly closes in progress.
    pub(super) closing: Vec<Closing<F>>,
    /// None until the first discovery round (which runs at once).
    pub(super) last_discovery: Option<Instant>,
    /// Rate limits of probe answers.
    pub(super) probes: discovery::ProbeLimits,
    pub(super) buf: Vec<u8>,
}

impl<F: Fabric> ConManager<F> {
    /// The job thread's loop; returns after [`ConManager::shutdown`], having
    /// closed every connection.
    pub fn run(&self) {
        let mut st = JobState::<F> {
            last_exchange: HashMap::new(),
            pending_since: HashMap::new(),
            closing: Vec::new(),
            last_discovery: None,
            probes: discovery::ProbeLimits::default(),
            buf: Vec::with_capacity(MAX_PACKET),
        };
        let mut rx = [0u8; MAX_PACKET + 1];
        let mut timeout = MAX_SLEEP;
        while self.running.load(Ordering::Acquire) {
            while let Some(v) = self.jobs.pop() {
                match Job::decode(v) {
                    Some(job) => self.handle_job(job, &mut st),
                    None => log::error!("node {}: undecodable job {v:#x} ignored", self.me),
                }
            }
            // Sleep until the next timer or a packet (a job kicks the socket).
            let wanted = self.next_wait(Instant::now(), &st);
            if wanted != timeout {
                match self.socket.set_read_timeout(Some(wanted)) {
                    Ok(()) => timeout = wanted,
                    Err(e) => log::debug!("node {}: setting the UDP read timeout failed: {e}", self.me),
                }
            }
            let received = self.socket.recv_from(&mut rx);
            self.stats.job_wakeups.fetch_add(1, Ordering::Relaxed);
            match received {
                Ok((n, from)) => self.handle_datagram(&rx[..n], from, &mut st),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => log::debug!("node {}: UDP receive failed: {e}", self.me),
            }
            self.periodic(&mut st);
        }
        self.close_all(&mut st);
        self.notify();
    }

    pub(super) fn handle_job(&self, job: Job, st: &mut JobState<F>) {
        match job {
            Job::Create(node) => {
                lock(&self.create_requested).remove(&node);
                let exists = self.table.read().unwrap_or_else(|p| p.into_inner()).contains_key(&node);
                let reachable = self.nodes.get(node).is_some_and(|a| !a.ip().is_unspecified());
                if !exists && reachable && self.foreign.get(node).is_none() {
                    if let Some(c) = self.create(node, st) {
                        self.send_exchange(&c, st);
                    }
                }
            }
            Job::Close(node) => self.close_conn(node, CloseKind::Drain, st),
            Job::CloseForce(node) => self.close_conn(node, CloseKind::Abort, st),
            Job::Lost(node) => (self.events)(NodeEvent::Lost(node)),
            Job::NodeRemoved(node) => {
                self.close_conn(node, CloseKind::Abort, st);
                lock(&self.discovered).remove(&node);
                self.foreign.forget(node);
                self.unbind(node);
                (self.events)(NodeEvent::Invalidated(node));
            }
            Job::Wake => {}
        }
    }

    /// Timers: exchange retransmission, close progress, discovery rounds.
    fn periodic(&self, st: &mut JobState<F>) {
        let now = Instant::now();
        self.retry_exchanges(now, st);
        self.progress_closes(now, st);
        // Discovery of nodes not heard from.
        let round = st.last_discovery.is_none_or(|t| now - t >= self.cfg.discovery_interval);
        self.probe_candidates(round, st);
        if round {
            st.last_discovery = Some(now);
            let known = lock(&self.discovered).clone();
            for (node, _) in self.nodes.all() {
                if !known.contains(&node) {
                    self.send(node, Body::Discover, &mut st.buf);
                }
            }
        }
    }

    /// How long the job thread may sleep: until the earliest timer of
    /// [`ConManager::periodic`], at most [`MAX_SLEEP`], rounded up to whole
    /// milliseconds and at least one (a zero read timeout means "forever").
    fn next_wait(&self, now: Instant, st: &JobState<F>) -> Duration {
        let mut due = now + MAX_SLEEP;
        let discovery = self.next_discovery_due(now, st.last_discovery);
        for d in [discovery, self.next_exchange_due(st), self.next_close_due(st)].into_iter().flatten() {
            due = due.min(d);
        }
        let ms = due.saturating_duration_since(now).as_micros().div_ceil(1000).max(1);
        Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }
}
