package io.ibdxnet.memory;

import java.nio.ByteBuffer;

/**
 * Memory committed page by page as it is first touched (anonymous private
 * mappings, pages given back with {@code madvise(MADV_DONTNEED)}).
 *
 * <p>The base version (JDK 17–21) has no way to map memory without a native
 * library: {@link #available} is false and callers take direct memory
 * instead. The multi-release jar's JDK 22+ version calls libc through
 * {@code java.lang.foreign}.
 */
public final class Pages {
    private Pages() {}

    /** True if {@link #map} can be used; never in this version. */
    public static boolean available() {
        return false;
    }

    /** Not in this version (see {@link #available}). */
    public static ByteBuffer map(long bytes) {
        throw new UnsupportedOperationException("no mmap on this JDK (JDK 22+ only)");
    }

    /** Not in this version: false. */
    public static boolean release(long address, long bytes) {
        return false;
    }

    /** Not known in this version: -1. */
    public static long resident(long address, long bytes) {
        return -1;
    }
}
