//! The contract between this library and its Java (and C) users: every
//! `#[repr(C)]` struct they share ([`structs`]), the table that describes
//! the structs' layout ([`layout`]), and every constant those structs and
//! the natives' results take ([`constants`]).
//!
//! Java hard-codes neither offsets nor constants: the `layouts` native hands
//! it [`table_text`] followed by the counters table's descriptor
//! ([`counters::descriptor_text`] of `msgrc::stats`), which it parses once
//! (`io.ibdxnet.ib.NativeLayout`);
//! a struct, field or constant the jar needs and the library does not
//! report fails with an error naming it.
//!
//! # When to raise the native ABI number
//! `nativeAbi` in `gradle.properties` is compiled into the library, and the
//! jar refuses a library built with another (`NativeLibrary.checkLibraryVersion`,
//! called from `JNI_OnLoad` before anything is registered). Raise it with any
//! change to: a native's name or signature (`jni/natives.rs`), a callback's
//! (`EngineCallbacks`), a shared struct, a constant's name or meaning, the
//! format of [`table_text`] or of the counters descriptor, or which entries
//! the counters table holds (the `stats` native leaves them out). A changed offset alone does not need it (Java
//! reads offsets), but it costs nothing to raise it then too.

pub mod constants;
pub mod counters;
pub mod layout;
pub mod structs;

pub use constants::*;
pub use layout::{layout_of, layouts, FieldLayout, StructLayout};
pub use structs::*;

/// The layout table as the `layouts` native returns it, one item a line:
/// `Name size align field:offset:size ...` per struct, then
/// `const NAME value` per constant (`const` is no struct's name in C).
pub fn table_text() -> String {
    let mut s = String::new();
    for l in layouts() {
        s += &format!("{} {} {}", l.name, l.size, l.align);
        for f in l.fields {
            s += &format!(" {}:{}:{}", f.name, f.offset, f.size);
        }
        s.push('\n');
    }
    for c in CONSTANTS {
        s += &format!("const {} {}\n", c.name, c.value);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_text_lists_every_struct_then_every_constant() {
        let text = table_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), layouts().len() + CONSTANTS.len());
        assert!(lines[0].starts_with("IbdxnetSge 16 8 addr:0:8 "), "{}", lines[0]);
        assert!(lines.contains(&"const EVENT_LEFT 6"), "{text}");
        assert!(lines.contains(&"const NO_BUFFER 4294967295"), "{text}");
    }
}
