//! The UDP protocol of the connection manager: discovery and queue pair
//! exchange. Our own versioned format, network byte order.
//!
//! ```text
//! header (20 bytes)
//!  0 magic u32 = "IBDX"   4 version u8   5 type u8   6 src node u16   8 dst node u16
//! 10 flags u16 (0)       12 instance u32 (sender's, random per engine)
//! 16 payload length u16  18 reserved u16 (0)          20 payload
//! Exchange payload (60 bytes)
//!  0 qpn u32   4 psn u32   8 lid u16   10 flags u16 (bit 0: sender is established)   12 mtu u32   16 gid [16]
//! 32 sim address u64      40 peer qpn u32 (the receiver's QPN the sender is connected to, 0 = none)
//! 44 sim network u64 (the sender's; 0 on an RDMA device)
//! 52 flow unit u64 (bytes one flow-control confirmation stands for in what the sender
//!    sends: the receiver confirms that connection's bytes in it; in
//!    [`MIN_FLOW_UNIT`, `MAX_FLOW_UNIT`], else the packet is malformed)
//! Close payload (4 bytes): qpn u32 of the closed queue pair
//! Leave payload (12 bytes): qpn u32 of the closed queue pair, handled u64: the bytes
//!   received on it that the leaving node's application handled beyond its last
//!   flow-control confirmation (u64::MAX: not known)
//! WrongFabric payload (8 bytes): sim network u64 of the sender (0 on an RDMA device)
//! Done payload (8 bytes): qpn u32 (the sender's), peer qpn u32 (the receiver's)
//! Challenge payload (20 bytes, keyed only): instance u32 (challenged), nonce [16]
//! Response payload (16 bytes, keyed only): nonce [16] (echoed)
//! Discover and DiscoverAck: no payload. A Discover may name dst 0xFFFF
//!   ([`ANY`], only on Discover): a probe sent to an address whose node id
//!   is not known yet; its answer is a DiscoverAck with src = the responder's id.
//! Keyed packets (version 0x87) end in a seal after the payload:
//!  +0 seq u64 (sender's, per instance and destination, from 1)   +8 HMAC-SHA256 [32] over every byte before it
//! ```
//!
//! The version byte tells keyed (`0x87`) from unkeyed (`7`) packets, so a
//! node with a key and one without recognise each other (see [`super::auth`]).
//!
//! An orderly close is two-phase: `Close` says "I post nothing more on this
//! queue pair", `Done` says "and everything I posted on it has been
//! acknowledged". A side takes its queue pair down once it sent its `Done`
//! and received the peer's: nothing is left on the wire either way.
//!
//! An exchange from a queue pair on another fabric instance (another
//! process's sim network, or sim against an RDMA device) is answered with
//! `WrongFabric` instead of a connection: its QPN names nothing reachable.
//! Version 4 added the sim network to the exchange, and `WrongFabric`;
//! version 5 the sender's flow-control unit, so nodes with different
//! flow-control settings confirm each other correctly; version 6 counts
//! sequence numbers per destination, refuses one more than
//! [`super::auth::MAX_AHEAD`] beyond the highest accepted, and lets a
//! receiver challenge an admitted instance whose packets its window refuses
//! (the answer re-synchronises the window); the format is unchanged.
//! Version 7 adds discovery by address (see `manager/discovery.rs`): a
//! `Discover` to [`ANY`] (dst `0xFFFF`, refused on every other type) probes
//! an address, and the `DiscoverAck` answering it (dst = the prober) names
//! the responder. A keyed probe is sealed like every packet (its sequence
//! numbers count under the destination [`ANY`]) but its receiver only
//! verifies the MAC: a probe never moves a sequence window or admits an
//! instance, it can only be answered. The answer is checked like every
//! other packet (window, instance challenge).

use super::node::NodeId;
use crate::fabric::{Gid, QpEndpoint};

/// "IBDX".
pub const MAGIC: u32 = 0x4942_4458;
/// Protocol version of unkeyed packets.
pub const VERSION: u8 = 7;
/// The destination of a probe (a `Discover` to an address whose node is
/// not known yet): any node. Valid only on `Discover`.
pub const ANY: NodeId = NodeId(0xFFFF);
/// Protocol version of keyed (sealed) packets: bit 7 marks the seal.
pub const VERSION_KEYED: u8 = 0x80 | VERSION;
/// Seal bytes after the payload of a keyed packet: sequence number and MAC.
pub const SEAL_LEN: usize = 8 + MAC_LEN;
/// MAC bytes (HMAC-SHA256).
pub const MAC_LEN: usize = 32;
/// Challenge nonce bytes.
pub const NONCE_LEN: usize = 16;
/// Header bytes.
pub const HEADER_LEN: usize = 20;
/// Exchange payload bytes.
pub const EXCHANGE_LEN: usize = 60;
/// Smallest flow-control unit a peer may name: smaller ones would make the
/// receiver send a confirmation for every few bytes (one per 255 units on
/// ib), more packets than the peer spends sending the data.
pub const MIN_FLOW_UNIT: u64 = 64;
/// Largest flow-control unit a peer may name: byte counts in units of it
/// stay far from overflowing a `u64`/`i64`.
pub const MAX_FLOW_UNIT: u64 = 1 << 62;
/// Largest packet we send or accept.
pub const MAX_PACKET: usize = 256;
/// `Leave::handled` when the leaving node does not know it (not an orderly shutdown).
pub const LEAVE_UNKNOWN: u64 = u64::MAX;

/// What a packet says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// "Are you there?"
    Discover,
    /// "I am."
    DiscoverAck,
    /// My queue pair for you, and which of your queue pairs I am connected to.
    Exchange {
        /// The sender's queue pair.
        endpoint: QpEndpoint,
        /// The receiver's QPN the sender's queue pair is connected to (0 = none yet).
        peer_qpn: u32,
        /// The sender considers the connection established (it knows we are connected).
        established: bool,
        /// Bytes one flow-control confirmation stands for in what the sender
        /// sends (its window × threshold): the receiver confirms in it.
        flow_unit: u64,
    },
    /// I closed my queue pair `qpn` for you, in order (eviction): nothing was lost.
    Close {
        /// The closed queue pair.
        qpn: u32,
    },
    /// My closing queue pair `qpn`, connected to your `peer_qpn`, has nothing
    /// in flight and posts nothing more (second phase of an orderly close).
    Done {
        /// The sender's closing queue pair.
        qpn: u32,
        /// The receiver's queue pair it is connected to.
        peer_qpn: u32,
    },
    /// My queue pair `qpn` for you is gone because I shut down or it failed:
    /// what was in flight may be lost.
    Leave {
        /// The closed queue pair.
        qpn: u32,
        /// Bytes received on it that the leaving node handled beyond its last
        /// flow-control confirmation, when it shuts down in order ([`LEAVE_UNKNOWN`]
        /// otherwise): the rest of what the receiver of this sent was not handled.
        handled: u64,
    },
    /// Keyed only: prove that your instance `instance` is alive by echoing
    /// `nonce` (a packet of an instance not yet seen may be a replay).
    Challenge {
        /// The challenged instance of the receiver.
        instance: u32,
        /// Echo this.
        nonce: [u8; NONCE_LEN],
    },
    /// Keyed only: the echo of a challenge's nonce.
    Response {
        /// The challenge's nonce.
        nonce: [u8; NONCE_LEN],
    },
    /// Your exchange was refused: your queue pair is on another fabric
    /// instance than mine, `sim_network` (0: an RDMA device).
    WrongFabric {
        /// The sender's sim network (0 on an RDMA device).
        sim_network: u64,
    },
}

impl Body {
    fn kind(&self) -> u8 {
        match self {
            Body::Discover => 1,
            Body::DiscoverAck => 2,
            Body::Exchange { .. } => 3,
            Body::Close { .. } => 4,
            Body::Leave { .. } => 5,
            Body::Done { .. } => 6,
            Body::Challenge { .. } => 7,
            Body::Response { .. } => 8,
            Body::WrongFabric { .. } => 9,
        }
    }
    fn payload_len(&self) -> usize {
        match self {
            Body::Discover | Body::DiscoverAck => 0,
            Body::Exchange { .. } => EXCHANGE_LEN,
            Body::Close { .. } => 4,
            Body::Leave { .. } => 12,
            Body::Done { .. } | Body::WrongFabric { .. } => 8,
            Body::Challenge { .. } => 4 + NONCE_LEN,
            Body::Response { .. } => NONCE_LEN,
        }
    }
}

/// The seal of a keyed packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seal {
    /// The sender's sequence number.
    pub seq: u64,
    /// HMAC-SHA256 over the packet up to and including `seq`.
    pub mac: [u8; MAC_LEN],
}

/// A connection manager packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Sender.
    pub src: NodeId,
    /// Intended receiver.
    pub dst: NodeId,
    /// The sender's instance id (changes when the peer restarts).
    pub instance: u32,
    /// Content.
    pub body: Body,
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than the header or its declared payload.
    Truncated,
    /// Not our magic number.
    BadMagic,
    /// Another protocol version.
    BadVersion(u8),
    /// Unknown packet type.
    BadType(u8),
    /// Payload length does not fit the type, or trailing bytes.
    BadLength,
    /// Reserved fields not zero, invalid node id or QPN.
    Malformed,
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (h, t) = self.0.split_at(N);
        self.0 = t;
        h.try_into().expect("split_at gave N bytes")
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }
}

impl Packet {
    /// Serialises into `out` (cleared first) as an unkeyed packet; a keyed
    /// one is sealed by [`super::auth`].
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&MAGIC.to_be_bytes());
        out.push(VERSION);
        out.push(self.body.kind());
        out.extend_from_slice(&self.src.0.to_be_bytes());
        out.extend_from_slice(&self.dst.0.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&self.instance.to_be_bytes());
        out.extend_from_slice(&(self.body.payload_len() as u16).to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        match self.body {
            Body::Exchange { endpoint: e, peer_qpn, established, flow_unit } => {
                out.extend_from_slice(&e.qpn.to_be_bytes());
                out.extend_from_slice(&e.psn.to_be_bytes());
                out.extend_from_slice(&e.lid.to_be_bytes());
                out.extend_from_slice(&u16::from(established).to_be_bytes());
                out.extend_from_slice(&e.mtu.to_be_bytes());
                out.extend_from_slice(&e.gid.0);
                out.extend_from_slice(&e.sim_addr.to_be_bytes());
                out.extend_from_slice(&peer_qpn.to_be_bytes());
                out.extend_from_slice(&e.sim_network.to_be_bytes());
                out.extend_from_slice(&flow_unit.to_be_bytes());
            }
            Body::WrongFabric { sim_network } => out.extend_from_slice(&sim_network.to_be_bytes()),
            Body::Close { qpn } => out.extend_from_slice(&qpn.to_be_bytes()),
            Body::Leave { qpn, handled } => {
                out.extend_from_slice(&qpn.to_be_bytes());
                out.extend_from_slice(&handled.to_be_bytes());
            }
            Body::Done { qpn, peer_qpn } => {
                out.extend_from_slice(&qpn.to_be_bytes());
                out.extend_from_slice(&peer_qpn.to_be_bytes());
            }
            Body::Challenge { instance, nonce } => {
                out.extend_from_slice(&instance.to_be_bytes());
                out.extend_from_slice(&nonce);
            }
            Body::Response { nonce } => out.extend_from_slice(&nonce),
            Body::Discover | Body::DiscoverAck => {}
        }
    }

    /// Parses one unkeyed datagram. Never panics, whatever the bytes.
    pub fn decode(buf: &[u8]) -> Result<Packet, ParseError> {
        Self::decode_as(buf, false)
    }

    /// Parses one keyed datagram into the packet and its seal (not yet
    /// verified). Never panics, whatever the bytes.
    pub fn decode_sealed(buf: &[u8]) -> Result<(Packet, Seal), ParseError> {
        if buf.len() < HEADER_LEN + SEAL_LEN {
            return Err(ParseError::Truncated);
        }
        let (body, seal) = buf.split_at(buf.len() - SEAL_LEN);
        let p = Self::decode_as(body, true)?;
        let mut r = Reader(seal);
        Ok((p, Seal { seq: r.u64(), mac: r.take() }))
    }

    /// Either kind: the seal is `Some` for a keyed datagram.
    pub fn decode_any(buf: &[u8]) -> Result<(Packet, Option<Seal>), ParseError> {
        if buf.get(4) == Some(&VERSION_KEYED) {
            Self::decode_sealed(buf).map(|(p, s)| (p, Some(s)))
        } else {
            Self::decode(buf).map(|p| (p, None))
        }
    }

    fn decode_as(buf: &[u8], keyed: bool) -> Result<Packet, ParseError> {
        if buf.len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        let mut r = Reader(buf);
        if r.u32() != MAGIC {
            return Err(ParseError::BadMagic);
        }
        let version = r.u8();
        if version != if keyed { VERSION_KEYED } else { VERSION } {
            return Err(ParseError::BadVersion(version));
        }
        let kind = r.u8();
        let (src, dst, flags, instance, len, reserved) = (r.u16(), r.u16(), r.u16(), r.u32(), r.u16(), r.u16());
        let src = NodeId::new(src).ok_or(ParseError::Malformed)?;
        // 0xFFFF as destination: a probe to any node, only on `Discover`.
        let dst = NodeId::new(dst).or((kind == 1).then_some(ANY)).ok_or(ParseError::Malformed)?;
        if flags != 0 || reserved != 0 {
            return Err(ParseError::Malformed);
        }
        let expected = match kind {
            1 | 2 => 0,
            3 => EXCHANGE_LEN,
            4 => 4,
            5 => 12,
            6 | 9 => 8,
            7 if keyed => 4 + NONCE_LEN,
            8 if keyed => NONCE_LEN,
            k => return Err(ParseError::BadType(k)),
        };
        if usize::from(len) != expected {
            return Err(ParseError::BadLength);
        }
        if r.0.len() < expected {
            return Err(ParseError::Truncated);
        }
        if r.0.len() > expected {
            return Err(ParseError::BadLength);
        }
        let valid_qpn = |q: u32| q <= 0x00FF_FFFF;
        let body = match kind {
            1 => Body::Discover,
            2 => Body::DiscoverAck,
            3 => {
                let (qpn, psn, lid, flags, mtu) = (r.u32(), r.u32(), r.u16(), r.u16(), r.u32());
                let gid = Gid(r.take());
                let (sim_addr, peer_qpn, sim_network, flow_unit) = (r.u64(), r.u32(), r.u64(), r.u64());
                if flags > 1 || qpn == 0 || !valid_qpn(qpn) || !valid_qpn(peer_qpn) || psn > 0x00FF_FFFF {
                    return Err(ParseError::Malformed);
                }
                if !(MIN_FLOW_UNIT..=MAX_FLOW_UNIT).contains(&flow_unit) {
                    return Err(ParseError::Malformed);
                }
                if !matches!(mtu, 256 | 512 | 1024 | 2048 | 4096) {
                    return Err(ParseError::Malformed);
                }
                let endpoint = QpEndpoint { qpn, psn, lid, gid, mtu, sim_addr, sim_network };
                Body::Exchange { endpoint, peer_qpn, established: flags == 1, flow_unit }
            }
            6 => {
                let (qpn, peer_qpn) = (r.u32(), r.u32());
                if qpn == 0 || peer_qpn == 0 || !valid_qpn(qpn) || !valid_qpn(peer_qpn) {
                    return Err(ParseError::Malformed);
                }
                Body::Done { qpn, peer_qpn }
            }
            7 => Body::Challenge { instance: r.u32(), nonce: r.take() },
            8 => Body::Response { nonce: r.take() },
            9 => Body::WrongFabric { sim_network: r.u64() },
            _ => {
                let qpn = r.u32();
                if qpn == 0 || !valid_qpn(qpn) {
                    return Err(ParseError::Malformed);
                }
                if kind == 4 {
                    Body::Close { qpn }
                } else {
                    Body::Leave { qpn, handled: r.u64() }
                }
            }
        };
        Ok(Packet { src, dst, instance, body })
    }
}

#[cfg(test)]
mod tests;
