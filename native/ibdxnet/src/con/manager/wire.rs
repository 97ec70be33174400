//! The manager's side of the UDP wire (protocol: [`crate::con::proto`]):
//! sending a packet (sealed by [`crate::con::auth`], with the test hook for
//! packet loss), and receiving one — decoding, checking that it is for us
//! and comes from its node's address, the authentication hook (challenges
//! and replay protection), and handing the body to the state machines.
//! Probes (a `Discover` to any node) and packets from candidate addresses
//! naming a node not in the table go to [`super::discovery`].

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::close::CloseKind;
use super::exchange::Exchange;
use super::{ConManager, JobState};
use crate::con::auth::Verdict;
use crate::con::event::NodeEvent;
use crate::con::node::NodeId;
use crate::con::proto::{Body, Packet, ANY, LEAVE_UNKNOWN};
use crate::fabric::Fabric;
use crate::util::lock;

/// A datagram of one zero byte wakes the job thread (not a protocol packet).
const KICK: [u8; 1] = [0];

impl<F: Fabric> ConManager<F> {
    /// Wakes the job thread from its receive wait.
    pub(super) fn kick(&self) {
        if let Err(e) = self.socket.send_to(&KICK, self.local_addr) {
            // Not lost: the loop also wakes at the socket's read timeout.
            log::debug!("node {}: waking the job thread failed: {e}", self.me);
        }
    }

    /// Sends `body` to `node` (if it is in the node table with an address:
    /// an unspecified one, `0.0.0.0` or `::`, names no peer).
    pub(super) fn send(&self, node: NodeId, body: Body, buf: &mut Vec<u8>) {
        let Some(addr) = self.nodes.get(node).filter(|a| !a.ip().is_unspecified()) else { return };
        self.send_to(addr, node, body, buf);
    }

    /// Sends `body` for node `dst` (or [`crate::con::proto::ANY`]) to `addr`.
    pub(super) fn send_to(&self, addr: SocketAddr, dst: NodeId, body: Body, buf: &mut Vec<u8>) {
        let every = self.drop_every.load(Ordering::Relaxed);
        if every != 0 && (self.stats.packets_out.fetch_add(1, Ordering::Relaxed) + 1) % u64::from(every) == 0 {
            return;
        }
        self.auth.encode(&Packet { src: self.me, dst, instance: self.instance, body }, buf);
        match self.socket.send_to(buf, addr) {
            Ok(_) if every == 0 => {
                self.stats.packets_out.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(e) => log::debug!("node {}: UDP send to {dst} at {addr} failed: {e}", self.me),
        }
    }

    /// One datagram from `from`.
    pub(super) fn handle_datagram(&self, data: &[u8], from: SocketAddr, st: &mut JobState<F>) {
        if data == KICK && from.port() == self.local_addr.port() {
            return;
        }
        let Some(p) = self.accept(data, from, st) else { return };
        self.stats.packets_in.fetch_add(1, Ordering::Relaxed);
        self.foreign.forget_restarted(p.src, p.instance);
        if lock(&self.discovered).insert(p.src) {
            (self.events)(NodeEvent::Discovered(p.src));
        }
        match p.body {
            Body::Discover => self.send(p.src, Body::DiscoverAck, &mut st.buf),
            Body::DiscoverAck => {}
            Body::Done { qpn, peer_qpn } => self.handle_done(p.src, p.instance, qpn, peer_qpn, st),
            Body::Close { qpn } => self.handle_peer_close(p.src, p.instance, qpn, CloseKind::Drain, st),
            Body::Leave { qpn, handled } => {
                let handled = (handled != LEAVE_UNKNOWN).then_some(handled);
                self.handle_peer_close(p.src, p.instance, qpn, CloseKind::PeerLeft { handled }, st)
            }
            Body::Exchange { endpoint, .. } if endpoint.sim_network != self.sim_network() => {
                self.refuse_exchange(p.src, p.instance, endpoint.sim_network, st)
            }
            Body::Exchange { endpoint, peer_qpn, established, flow_unit } => {
                let x = Exchange {
                    instance: p.instance,
                    remote: endpoint,
                    peer_qpn,
                    peer_established: established,
                    flow_unit,
                };
                self.handle_exchange(p.src, x, st)
            }
            Body::WrongFabric { sim_network } => self.handle_wrong_fabric(p.src, p.instance, sim_network, st),
            Body::Challenge { .. } | Body::Response { .. } => {} // consumed by `auth`
        }
    }

    /// The packet in `data` if it is well formed, for us, sent from its
    /// node's address and accepted by authentication; otherwise counts why
    /// not (and answers a challenge) and returns `None`.
    fn accept(&self, data: &[u8], from: SocketAddr, st: &mut JobState<F>) -> Option<Packet> {
        let (p, seal) = match Packet::decode_any(data) {
            Ok(p) => p,
            Err(e) => {
                self.stats.dropped_malformed.fetch_add(1, Ordering::Relaxed);
                log::debug!("node {}: dropped malformed packet from {from}: {e:?}", self.me);
                return None;
            }
        };
        if p.dst == ANY {
            self.handle_probe(&p, seal, data, from, st);
            return None;
        }
        let Some(src_addr) = self.nodes.get(p.src).filter(|_| p.dst == self.me) else {
            if self.for_discovery(&p, from) {
                return self.answer_from_candidate(p, seal, data, from, st);
            }
            self.stats.dropped_foreign.fetch_add(1, Ordering::Relaxed);
            log::debug!("node {}: dropped packet for {} from unknown or foreign node {}", self.me, p.dst, p.src);
            return None;
        };
        // Only the node's own address speaks for it: a packet from elsewhere
        // could otherwise forge a restart (new instance id) or a close and
        // tear down a working connection. An unspecified table address
        // (`0.0.0.0`, `::`) matches no source, as on NIO: it says where a
        // node listens, not who may speak for it.
        if from.port() != src_addr.port() || from.ip() != src_addr.ip() || src_addr.ip().is_unspecified() {
            self.stats.dropped_spoofed.fetch_add(1, Ordering::Relaxed);
            log::debug!("node {}: dropped packet claiming to be from {} ({src_addr}) sent from {from}", self.me, p.src);
            return None;
        }
        match self.auth.check(&p, seal, data, self.instance, Instant::now()) {
            Verdict::Accept => Some(p),
            Verdict::Drop | Verdict::Admitted => None,
            Verdict::Reply(body) => {
                let answered = matches!(body, Body::Response { .. });
                self.send(p.src, body, &mut st.buf);
                if answered {
                    // Admitted now (unless the response is lost): repeat at
                    // once what the challenge stopped instead of at the next retry.
                    self.resend_to(p.src, st);
                    self.resend_closes_to(p.src, Instant::now(), st);
                }
                None
            }
        }
    }
}
