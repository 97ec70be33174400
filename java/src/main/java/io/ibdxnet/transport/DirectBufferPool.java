package io.ibdxnet.transport;

import io.ibdxnet.memory.Memory;
import java.nio.ByteBuffer;

/**
 * Receive buffers for the Java transports: {@code count} direct buffers of
 * {@code size} bytes, lent out by index and returned from any thread
 * (lock-free). Their native addresses go into {@link IncomingBuffer}s.
 */
public final class DirectBufferPool {
    private final ByteBuffer[] buffers;
    private final long[] addresses;
    private final IntQueue free;

    public DirectBufferPool(int count, int size) {
        this(count, size, count + " buffers of " + size + " bytes");
    }

    /**
     * {@code count} buffers of {@code size} bytes, for {@code what} (the
     * settings that sized it, for the message): refused at once with an
     * {@link IllegalStateException} when the JVM's direct memory limit is
     * smaller than the whole, or when it runs out while they are allocated.
     */
    public DirectBufferPool(int count, int size, String what) {
        long total = (long) count * size;
        if (total > DirectMemory.limit()) {
            throw new IllegalStateException(DirectMemory.refusal(total, what));
        }
        buffers = new ByteBuffer[count];
        addresses = new long[count];
        free = new IntQueue(count);
        for (int i = 0; i < count; i++) {
            try {
                buffers[i] = ByteBuffer.allocateDirect(size);
            } catch (OutOfMemoryError e) {
                throw new IllegalStateException(DirectMemory.refusal(total, what) + " (" + e.getMessage() + " at buffer "
                        + i + ")", e);
            }
            addresses[i] = Memory.address(buffers[i]);
            free.offer(i);
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
