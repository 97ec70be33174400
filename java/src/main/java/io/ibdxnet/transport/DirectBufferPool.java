package io.ibdxnet.transport;

import static io.ibdxnet.ib.UnsafeAccess.UNSAFE;

import io.ibdxnet.core.IntQueue;
import java.nio.Buffer;
import java.nio.ByteBuffer;

/**
 * Receive buffers for the Java transports: {@code count} direct buffers of
 * {@code size} bytes, lent out by index and returned from any thread
 * (lock-free). Their native addresses go into {@link IncomingBuffer}s.
 */
public final class DirectBufferPool {
    private static final long ADDRESS = addressOffset();
    private final ByteBuffer[] buffers;
    private final long[] addresses;
    private final IntQueue free;

    public DirectBufferPool(int count, int size) {
        buffers = new ByteBuffer[count];
        addresses = new long[count];
        free = new IntQueue(count);
        for (int i = 0; i < count; i++) {
            buffers[i] = ByteBuffer.allocateDirect(size);
            addresses[i] = address(buffers[i]);
            free.offer(i);
        }
    }

    /** The native address of a direct buffer's first byte. */
    public static long address(ByteBuffer direct) {
        if (!direct.isDirect()) {
            throw new IllegalArgumentException("not a direct buffer");
        }
        return UNSAFE.getLong(direct, ADDRESS);
    }

    private static long addressOffset() {
        try {
            return UNSAFE.objectFieldOffset(Buffer.class.getDeclaredField("address"));
        } catch (NoSuchFieldException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** A free buffer's index, or -1 if all are lent out. */
    public int take() {
        return free.poll();
    }

    /** Returns buffer {@code id} (any thread). */
    public void release(int id) {
        if (!free.offer(id)) {
            throw new IllegalStateException("more buffers returned than lent (buffer " + id + ")");
        }
    }

    public ByteBuffer buffer(int id) {
        return buffers[id];
    }

    public long address(int id) {
        return addresses[id];
    }

    public int size() {
        return buffers.length;
    }
}
