//! The immediate data of every send work request (the send thread packs it,
//! the receive thread unpacks it). Layout in host order (the fabric sends it
//! big-endian): bits 31–16 source node id, 15–8 flow-control data, 7–0
//! reserved (0).

/// Packs source node and flow-control byte.
pub fn pack(source: u16, fc: u8) -> u32 {
    (u32::from(source) << 16) | (u32::from(fc) << 8)
}

/// Source node id.
pub fn source(imm: u32) -> u16 {
    (imm >> 16) as u16
}

/// Flow-control byte.
pub fn fc(imm: u32) -> u8 {
    (imm >> 8) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_and_flow_control_survive_packing() {
        let v = pack(0xBEEF, 0x7F);
        assert_eq!((source(v), fc(v)), (0xBEEF, 0x7F));
        assert_eq!(v & 0xFF, 0, "the low byte is reserved");
    }
}
