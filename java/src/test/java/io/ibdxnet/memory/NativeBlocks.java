package io.ibdxnet.memory;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** Zeroed native memory for tests, by address (direct buffers kept alive until {@link #free}). */
public final class NativeBlocks {
    private static final Map<Long, ByteBuffer> LIVE = new ConcurrentHashMap<>();

    private NativeBlocks() {}

    public static long allocate(long n) {
        ByteBuffer b = ByteBuffer.allocateDirect(Math.toIntExact(Math.max(1, n)));
        long address = Memory.address(b);
        LIVE.put(address, b);
        return address;
    }

    public static void free(long address) {
        if (LIVE.remove(address) == null) {
            throw new IllegalArgumentException("not allocated here: " + address);
        }
    }
}
