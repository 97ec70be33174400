//! The numbers Java and C read from or write into the shared structs and
//! the natives' results. Each is written here once; [`CONSTANTS`] lists
//! them all by name, and Java reads that list (as `const NAME VALUE`
//! lines of the layout table) instead of repeating the values.

/// One published constant: its name (as in Rust, Java and C) and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Constant {
    /// The name Java looks it up by.
    pub name: &'static str,
    /// The value, widened to `i64` (Java narrows it to the field's type:
    /// [`NO_BUFFER`] reads back as the `int` -1).
    pub value: i64,
}

/// Declares each constant and lists it in [`CONSTANTS`], so a constant
/// cannot be defined without being published.
macro_rules! constants {
    ($( $(#[doc = $doc:expr])* $name:ident : $ty:ty = $value:expr; )*) => {
        $( $(#[doc = $doc])* pub const $name: $ty = $value; )*

        /// Every constant of this module, in declaration order.
        pub const CONSTANTS: &[Constant] = &[$(Constant { name: stringify!($name), value: $name as i64 }),*];
    };
}

constants! {
    /// The node id that is never a real node: `node_id` of a
    /// `PrevWorkResults` when there was no package.
    NODE_ID_INVALID: u16 = 0xFFFF;
    /// Bit 0 of `NextWorkPackage::flags`: the package is valid (send something).
    NWP_VALID: u8 = 1;
    /// The largest flow-control count one `NextWorkPackage` carries (`fc_data` is a `u8`).
    NWP_FC_DATA_MAX: u8 = u8::MAX;
    /// `connection` of a `NextWorkPackage` that names no connection (not
    /// checked); also never the id of a real connection.
    CONNECTION_NONE: u32 = 0;
    /// `buffer_id` of an `IncomingEntry` that carries only flow-control data.
    NO_BUFFER: u32 = u32::MAX;
    /// `nodeEvent` kind: a node was discovered.
    EVENT_DISCOVERED: i32 = 1;
    /// `nodeEvent` kind: a node was invalidated (removed, or its address changed).
    EVENT_INVALIDATED: i32 = 2;
    /// `nodeEvent` kind: the connection to a node failed.
    EVENT_DISCONNECTED: i32 = 3;
    /// `nodeEvent` kind: an established connection was closed in order
    /// (eviction, replacement): not a failure.
    EVENT_CLOSED: i32 = 4;
    /// `nodeEvent` kind: data in flight on a connection closed in order did not arrive.
    EVENT_LOST: i32 = 5;
    /// `nodeEvent` kind: the peer shut down; the value is the bytes it
    /// handled beyond its last confirmation, or [`LEFT_HANDLED_UNKNOWN`].
    EVENT_LEFT: i32 = 6;
    /// The value of an [`EVENT_LEFT`] whose peer did not say what it handled.
    LEFT_HANDLED_UNKNOWN: i64 = -1;
    /// `returnBuffer`: the buffer went back to the pool.
    RETURN_BUFFER_OK: i32 = 0;
    /// `returnBuffer`: no buffer has that id.
    RETURN_BUFFER_UNKNOWN: i32 = 1;
    /// `returnBuffer`: the buffer was not in use (returned twice).
    RETURN_BUFFER_NOT_IN_USE: i32 = 2;
    /// `IbdxnetDeviceInfo::link_layer`: InfiniBand.
    LINK_LAYER_INFINIBAND: u8 = 1;
    /// `IbdxnetDeviceInfo::link_layer`: Ethernet (RoCE).
    LINK_LAYER_ETHERNET: u8 = 2;
    /// `IbdxnetDeviceInfo::link_layer`: the in-process simulator.
    LINK_LAYER_SIM: u8 = 3;
}

// The connection manager's invalid id is the one published.
const _: () = assert!(crate::con::NodeId::INVALID.0 == NODE_ID_INVALID);

/// The constant called `name`, if it is published.
pub fn constant(name: &str) -> Option<i64> {
    CONSTANTS.iter().find(|c| c.name == name).map(|c| c.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        for (i, c) in CONSTANTS.iter().enumerate() {
            assert!(CONSTANTS[..i].iter().all(|d| d.name != c.name), "{} is published twice", c.name);
        }
    }

    #[test]
    fn event_kinds_are_distinct_and_nonzero() {
        let kinds: Vec<_> = CONSTANTS.iter().filter(|c| c.name.starts_with("EVENT_")).map(|c| c.value).collect();
        assert_eq!(kinds.len(), 6);
        for (i, k) in kinds.iter().enumerate() {
            assert!(*k != 0 && !kinds[..i].contains(k), "event kind {k} is 0 or used twice");
        }
    }

    #[test]
    fn values_widen_without_changing_bits() {
        assert_eq!(constant("NO_BUFFER"), Some(0xFFFF_FFFF));
        assert_eq!(constant("NO_BUFFER").map(|v| v as i32), Some(-1), "Java reads it as an int");
        assert_eq!(constant("NODE_ID_INVALID"), Some(65535));
        assert_eq!(constant("NO_SUCH_CONSTANT"), None);
    }
}
