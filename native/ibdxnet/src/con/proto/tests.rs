//! The codec's tests: round trips, byte order, every malformed case, and a
//! property test over random and mutated bytes.

use super::*;

fn exchange() -> Packet {
    let endpoint = QpEndpoint {
        qpn: 0x12345,
        psn: 0xABCDE,
        lid: 7,
        gid: Gid([3; 16]),
        mtu: 4096,
        sim_addr: 99,
        sim_network: 0x5EED,
    };
    Packet {
        src: NodeId(1),
        dst: NodeId(2),
        instance: 0xDEAD_BEEF,
        body: Body::Exchange { endpoint, peer_qpn: 17, established: true, flow_unit: 1_677_721 },
    }
}

#[test]
fn every_packet_type_round_trips() {
    let mut buf = Vec::new();
    for body in [
        Body::Discover,
        Body::DiscoverAck,
        exchange().body,
        Body::Close { qpn: 5 },
        Body::Leave { qpn: 6, handled: 0x1_0000_0001 },
        Body::Leave { qpn: 6, handled: LEAVE_UNKNOWN },
        Body::Done { qpn: 7, peer_qpn: 8 },
        Body::WrongFabric { sim_network: 0xFEED_F00D_0000_0001 },
    ] {
        let p = Packet { body, ..exchange() };
        p.encode(&mut buf);
        assert_eq!(Packet::decode(&buf), Ok(p));
    }
}

#[test]
fn header_is_in_network_byte_order() {
    let mut buf = Vec::new();
    exchange().encode(&mut buf);
    assert_eq!(&buf[..4], b"IBDX");
    assert_eq!((buf[4], buf[5]), (VERSION, 3));
    assert_eq!(&buf[6..10], &[0, 1, 0, 2]);
    assert_eq!(&buf[12..16], &[0xDE, 0xAD, 0xBE, 0xEF]);
    assert_eq!(buf.len(), HEADER_LEN + EXCHANGE_LEN);
}

fn with_byte(b: &[u8], i: usize, v: u8) -> Vec<u8> {
    let mut b = b.to_vec();
    b[i] = v;
    b
}

#[test]
fn malformed_packets_are_rejected_with_a_reason() {
    let mut good = Vec::new();
    exchange().encode(&mut good);
    let with = |i: usize, v: u8| {
        let mut b = good.clone();
        b[i] = v;
        Packet::decode(&b)
    };
    assert_eq!(Packet::decode(&good[..10]), Err(ParseError::Truncated));
    assert_eq!(Packet::decode(&good[..HEADER_LEN + 3]), Err(ParseError::Truncated));
    assert_eq!(with(0, b'X'), Err(ParseError::BadMagic));
    assert_eq!(with(4, 9), Err(ParseError::BadVersion(9)));
    // Version 7 added probes to any node: version 6 peers are refused, keyed or not.
    assert_eq!((VERSION, VERSION_KEYED), (7, 0x87));
    assert_eq!(with(4, 6), Err(ParseError::BadVersion(6)));
    assert_eq!(Packet::decode_any(&with_byte(&good, 4, 0x86)).map(|p| p.0), Err(ParseError::BadVersion(0x86)));
    assert_eq!(with(5, 42), Err(ParseError::BadType(42)));
    assert_eq!(with(5, 1), Err(ParseError::BadLength), "discover with a payload");
    assert_eq!(with(10, 1), Err(ParseError::Malformed), "flags must be zero");
    let mut forged = good.clone();
    forged[6..8].copy_from_slice(&[0xFF, 0xFF]);
    assert_eq!(Packet::decode(&forged), Err(ParseError::Malformed), "source 0xFFFF");
    let mut to_any = good.clone();
    to_any[8..10].copy_from_slice(&[0xFF, 0xFF]);
    assert_eq!(Packet::decode(&to_any), Err(ParseError::Malformed), "an exchange to any node");
    let mut long = good.clone();
    long.push(0);
    assert_eq!(Packet::decode(&long), Err(ParseError::BadLength));
    assert_eq!(with(HEADER_LEN, 0x01), Err(ParseError::Malformed), "qpn beyond 24 bits");
    assert_eq!(with(HEADER_LEN + 14, 0x33), Err(ParseError::Malformed), "odd mtu");
    assert_eq!(with(HEADER_LEN + 11, 2), Err(ParseError::Malformed), "unknown exchange flag");
}

/// Version 7: a `Discover` may go to [`ANY`] (a probe); no other type may,
/// and no packet may come from 0xFFFF.
#[test]
fn only_a_discover_may_go_to_any_node() {
    let mut buf = Vec::new();
    let probe = Packet { src: NodeId(3), dst: ANY, instance: 9, body: Body::Discover };
    probe.encode(&mut buf);
    assert_eq!(&buf[8..10], &[0xFF, 0xFF]);
    assert_eq!(Packet::decode(&buf), Ok(probe));
    for body in [Body::DiscoverAck, Body::Close { qpn: 5 }, Body::Done { qpn: 7, peer_qpn: 8 }, exchange().body] {
        Packet { body, ..probe }.encode(&mut buf);
        assert_eq!(Packet::decode(&buf), Err(ParseError::Malformed), "{body:?} to any node");
    }
    Packet { src: ANY, dst: NodeId(3), ..probe }.encode(&mut buf);
    assert_eq!(Packet::decode(&buf), Err(ParseError::Malformed), "a probe from 0xFFFF");
}

/// The peer's flow-control unit is a trust boundary: outside
/// [`MIN_FLOW_UNIT`, `MAX_FLOW_UNIT`] the exchange is malformed.
#[test]
fn flow_unit_out_of_range_is_malformed() {
    let unit = |u: u64| {
        let mut p = exchange();
        if let Body::Exchange { flow_unit, .. } = &mut p.body {
            *flow_unit = u;
        }
        let mut b = Vec::new();
        p.encode(&mut b);
        Packet::decode(&b)
    };
    for ok in [MIN_FLOW_UNIT, 104_857, 2 << 20, MAX_FLOW_UNIT] {
        assert!(matches!(unit(ok), Ok(Packet { body: Body::Exchange { flow_unit, .. }, .. }) if flow_unit == ok));
    }
    for bad in [0, 1, MIN_FLOW_UNIT - 1, MAX_FLOW_UNIT + 1, u64::MAX] {
        assert_eq!(unit(bad), Err(ParseError::Malformed), "unit {bad}");
    }
    let mut good = Vec::new();
    exchange().encode(&mut good);
    assert_eq!(&good[HEADER_LEN + 52..], &1_677_721u64.to_be_bytes(), "the unit is the exchange's last field");
}

/// Property: decoding arbitrary bytes never panics, and whatever decodes
/// re-encodes to the same bytes.
#[test]
fn random_and_mutated_bytes_never_panic() {
    let cases: u64 = if cfg!(miri) { 1_000 } else { 1_000_000 };
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut good = Vec::new();
    exchange().encode(&mut good);
    let mut buf = Vec::new();
    let (mut accepted, mut out) = (0u64, Vec::new());
    for i in 0..cases {
        buf.clear();
        if i % 2 == 0 {
            // Mutations of a valid packet reach deep into the parser.
            buf.extend_from_slice(&good);
            for _ in 0..(next() % 4 + 1) {
                let at = (next() % buf.len() as u64) as usize;
                buf[at] = next() as u8;
            }
            buf.truncate((next() % (good.len() as u64 + 2)) as usize);
        } else {
            let len = (next() % 80) as usize;
            buf.extend((0..len).map(|_| next() as u8));
        }
        // Keyed parsing of the same bytes, marked keyed, must not panic either.
        let mut keyed = buf.clone();
        if keyed.len() > 4 {
            keyed[4] = VERSION_KEYED;
        }
        let _ = Packet::decode_any(&keyed); // any outcome but a panic is right
        if let Ok(p) = Packet::decode(&buf) {
            accepted += 1;
            p.encode(&mut out);
            assert_eq!(out, buf, "accepted packet does not re-encode identically");
        }
    }
    assert!(accepted > 0, "mutations never produced a valid packet");
}
