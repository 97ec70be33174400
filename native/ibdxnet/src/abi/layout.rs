//! A machine-readable description of the shared structs' layout, built
//! from the compiler's own numbers (`offset_of!`, `size_of`).
//!
//! Java does not hard-code offsets: it reads [`layouts`] (through
//! [`super::table_text`]) and maps fields by name. The tests check the
//! table against the compiler and against a C compiler reading the
//! generated header.

use super::structs::{
    CompletedWork, CompletedWorkList, IbdxnetDeviceInfo, IncomingEntry, IncomingRingHeader, NextWorkPackage,
    PrevWorkResults, SleepWord,
};
use crate::fabric::Sge;

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
        describe!(CompletedWorkList as IbdxnetCompletedWorkList {
            count: u32,
            capacity: u32,
            seq: u32,
            acked: u32,
            prev_applied: u32,
            reserved: u32,
        }),
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
        describe!(SleepWord as IbdxnetSleepWord { sleeping: std::sync::atomic::AtomicU32 }),
    ]
}

/// The layout of struct `name`, if it is shared.
pub fn layout_of(name: &str) -> Option<StructLayout> {
    layouts().into_iter().find(|l| l.name == name)
}

const _: () = assert!(std::mem::size_of::<Sge>() == 16);
