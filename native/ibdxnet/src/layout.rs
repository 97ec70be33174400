//! The `#[repr(C)]` structures shared with Java (through `Unsafe`) and C
//! (through the generated `include/ibdxnet.h`), and a machine-readable
//! description of their layout.
//!
//! One source of truth: Java does not hard-code offsets; it reads
//! [`LAYOUTS`] through a native call and maps fields by name. The tests
//! check the table against the compiler (`offset_of!`) and against a C
//! compiler reading the generated header.

use crate::fabric::{DeviceInfo, LinkLayer, Sge};
use crate::msgrc::structs::{
    CompletedWork, CompletedWorkList, IncomingEntry, IncomingRingHeader, NextWorkPackage, PrevWorkResults,
};

/// Device limits and port attributes as Java and C see them.
///
/// ```text
///  0 max_qp_wr   4 max_sge   8 max_srq_wr  12 max_srq_sge
/// 16 max_cqe    20 active_mtu 24 max_inline_data 28 lid(u16) 30 port(u8) 31 link_layer(u8)
/// 32 gid[16]    48 sim_addr(u64)  56 max_mr_size(u64)            size 64
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbdxnetDeviceInfo {
    /// Maximum work requests per queue.
    pub max_qp_wr: u32,
    /// Maximum SGEs per request.
    pub max_sge: u32,
    /// Maximum work requests per SRQ.
    pub max_srq_wr: u32,
    /// Maximum SGEs per SRQ request.
    pub max_srq_sge: u32,
    /// Maximum completion queue entries.
    pub max_cqe: u32,
    /// Active MTU in bytes.
    pub active_mtu: u32,
    /// Largest inline send (0 if unknown).
    pub max_inline_data: u32,
    /// Local identifier.
    pub lid: u16,
    /// Port number.
    pub port: u8,
    /// 1 = InfiniBand, 2 = Ethernet (RoCE), 3 = sim.
    pub link_layer: u8,
    /// GID used for RoCE.
    pub gid: [u8; 16],
    /// Simulator device address (0 on verbs).
    pub sim_addr: u64,
    /// Maximum bytes of one memory region.
    pub max_mr_size: u64,
}

impl IbdxnetDeviceInfo {
    /// Fills the shared struct from a device description.
    pub fn new(info: &DeviceInfo, max_inline_data: u32) -> Self {
        IbdxnetDeviceInfo {
            max_qp_wr: info.max_qp_wr,
            max_sge: info.max_sge,
            max_srq_wr: info.max_srq_wr,
            max_srq_sge: info.max_srq_sge,
            max_cqe: info.max_cqe,
            active_mtu: info.active_mtu,
            max_inline_data,
            lid: info.lid,
            port: info.port,
            link_layer: match info.link_layer {
                LinkLayer::InfiniBand => 1,
                LinkLayer::Ethernet => 2,
                LinkLayer::Sim => 3,
            },
            gid: info.gid.0,
            sim_addr: info.sim_addr,
            max_mr_size: info.max_mr_size,
        }
    }
}

/// One field of a shared struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLayout {
    /// Field name as in Rust and C.
    pub name: &'static str,
    /// Byte offset.
    pub offset: usize,
    /// Byte size.
    pub size: usize,
}

/// The layout of one shared struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StructLayout {
    /// Struct name as in C (and Java); equal to the Rust name unless the
    /// Rust type is exported under a prefixed name.
    pub name: &'static str,
    /// `sizeof`.
    pub size: usize,
    /// `alignof`.
    pub align: usize,
    /// Fields in declaration order.
    pub fields: &'static [FieldLayout],
}

/// Describes a `#[repr(C)]` struct's fields with the compiler's own numbers.
/// Field types are spelled out and type-checked against the struct.
macro_rules! describe {
    ($ty:ident { $($field:ident : $fty:ty),* $(,)? }) => {
        describe!($ty as $ty { $($field: $fty),* })
    };
    ($ty:ident as $cname:ident { $($field:ident : $fty:ty),* $(,)? }) => {{
        const FIELDS: &[FieldLayout] = &[$(FieldLayout {
            name: stringify!($field),
            offset: std::mem::offset_of!($ty, $field),
            size: std::mem::size_of::<$fty>(),
        }),*];
        $(let _: fn(&$ty) -> &$fty = |s: &$ty| &s.$field;)*
        StructLayout {
            name: stringify!($cname),
            size: std::mem::size_of::<$ty>(),
            align: std::mem::align_of::<$ty>(),
            fields: FIELDS,
        }
    }};
}

/// Every struct shared across the language boundary.
pub fn layouts() -> Vec<StructLayout> {
    vec![
        describe!(Sge as IbdxnetSge { addr: u64, length: u32, lkey: u32 }),
        describe!(IbdxnetDeviceInfo {
            max_qp_wr: u32,
            max_sge: u32,
            max_srq_wr: u32,
            max_srq_sge: u32,
            max_cqe: u32,
            active_mtu: u32,
            max_inline_data: u32,
            lid: u16,
            port: u8,
            link_layer: u8,
            gid: [u8; 16],
            sim_addr: u64,
            max_mr_size: u64,
        }),
        describe!(NextWorkPackage as IbdxnetNextWorkPackage {
            node_id: u16,
            fc_data: u8,
            flags: u8,
            offset: u32,
            length: u32,
            connection: u32,
        }),
        describe!(PrevWorkResults as IbdxnetPrevWorkResults {
            node_id: u16,
            fc_posted: u8,
            fc_not_posted: u8,
            bytes_posted: u32,
            bytes_not_posted: u32,
            reserved: u32,
        }),
        describe!(CompletedWork as IbdxnetCompletedWork { node_id: u16, fc_data: u16, bytes: u32, connection: u32 }),
        describe!(CompletedWorkList as IbdxnetCompletedWorkList { count: u32, capacity: u32 }),
        describe!(IncomingEntry as IbdxnetIncomingEntry {
            source_node_id: u16,
            fc_data: u8,
            reserved: u8,
            data_length: u32,
            buffer_id: u32,
            connection: u32,
            data_address: u64,
        }),
        describe!(IncomingRingHeader as IbdxnetIncomingRingHeader { used: u32, front: u32, back: u32, size: u32 }),
    ]
}

/// The layout of struct `name`, if it is shared.
pub fn layout_of(name: &str) -> Option<StructLayout> {
    layouts().into_iter().find(|l| l.name == name)
}

// The documented diagram above, pinned.
const _: () = assert!(std::mem::size_of::<IbdxnetDeviceInfo>() == 64);
const _: () = assert!(std::mem::offset_of!(IbdxnetDeviceInfo, gid) == 32);
const _: () = assert!(std::mem::offset_of!(IbdxnetDeviceInfo, sim_addr) == 48);
const _: () = assert!(std::mem::size_of::<Sge>() == 16);
