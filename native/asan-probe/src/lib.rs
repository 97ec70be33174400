//! Negative control for `tools/asan/run.sh`: loaded into a JVM next to an
//! ASan-built `libibdxnet.so`, this JNI method reads one byte past a heap
//! allocation. The run passes only if AddressSanitizer reports it — proof
//! that the sanitizer runtime is active in the JVM and that Rust code in a
//! `cdylib` is instrumented, so zero reports from the real tests mean
//! something. Never built into the product.

#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::c_void;

/// `io.ibdxnet.sanitizer.AsanProbe.readPastAllocation()`: returns the byte
/// after the end of a 16-byte heap buffer (a heap-buffer-overflow).
#[no_mangle]
pub extern "system" fn Java_io_ibdxnet_sanitizer_AsanProbe_readPastAllocation(
    _env: *mut c_void,
    _class: *mut c_void,
) -> i32 {
    let buffer = std::hint::black_box(vec![7u8; 16]);
    // SAFETY: deliberately not sound — this is the bug the sanitizer must catch;
    // without ASan it reads a byte of the allocator's slack, never unmapped memory.
    let byte = unsafe { buffer.as_ptr().add(buffer.len()).read_volatile() };
    i32::from(byte)
}
