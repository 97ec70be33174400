package io.ibdxnet.transport;

import io.ibdxnet.memory.Memory;
import java.nio.ByteBuffer;

/**
 * Receive buffers for the Java transports: up to {@code count} direct
 * buffers of {@code size} bytes, lent out by index and returned from any
 * thread (lock-free). A few are allocated at start; more only when every
 * allocated one is lent out, so an idle or lightly used node holds little
 * (the native engine's receive pool grows the same way). Buffers are kept
 * once allocated. Their native addresses go into {@link IncomingBuffer}s.
 */
public final class DirectBufferPool {
    /** Buffers allocated at start (at most {@code count}). */
    public static final int INITIAL = 16;

    private final ByteBuffer[] buffers;
    private final long[] addresses;
    private final IntQueue free;
    private final int size;
    private final String what;
    /** Buffers allocated so far; written under {@code this}. */
    private volatile int allocated;
    /** Growths refused because the JVM's direct memory ran out. */
    private volatile long refused;

    public DirectBufferPool(int count, int size) {
        this(count, size, count + " buffers of " + size + " bytes");
    }

    /**
     * Up to {@code count} buffers of {@code size} bytes, for {@code what}
     * (the settings that sized it, for the message): refused at once with an
     * {@link IllegalStateException} when the JVM's direct memory limit is
     * smaller than the whole, or when the first {@link #INITIAL} cannot be
     * allocated.
     */
    public DirectBufferPool(int count, int size, String what) {
        long total = (long) count * size;
        if (total > DirectMemory.limit()) {
            throw new IllegalStateException(DirectMemory.refusal(total, what));
        }
        this.size = size;
        this.what = what;
        buffers = new ByteBuffer[count];
        addresses = new long[count];
        free = new IntQueue(count);
        synchronized (this) {
            for (int i = 0; i < Math.min(count, INITIAL); i++) {
                try {
                    allocate();
                } catch (OutOfMemoryError e) {
                    throw new IllegalStateException(DirectMemory.refusal(total, what) + " (" + e.getMessage()
                            + " at buffer " + i + ")", e);
                }
                free.offer(i);
            }
        }
    }

    /**
     * A free buffer's index, or -1 if all are lent out (including when the
     * pool could not grow: the JVM's direct memory is used up, see
     * {@link #refused}). A reader that gets -1 waits for a {@link #release}.
     */
    public int take() {
        int id = free.poll();
        if (id >= 0 || allocated == buffers.length) {
            return id;
        }
        return grow();
    }

    /** Allocates one more buffer for the caller, unless another came back or the pool is full. */
    private synchronized int grow() {
        int id = free.poll();
        if (id >= 0 || allocated == buffers.length) {
            return id;
        }
        try {
            return allocate();
        } catch (OutOfMemoryError e) {
            refused++; // the lent-out buffers come back: receiving goes on with those
            return -1;
        }
    }

    /**
     * Allocates buffer {@code allocated} and returns its index. Its slots are
     * written before the index is handed out: a thread that gets the index
     * from the taker (or from {@link #release} through the free queue) sees them.
     */
    private int allocate() {
        int id = allocated;
        ByteBuffer b = ByteBuffer.allocateDirect(size);
        buffers[id] = b;
        addresses[id] = Memory.address(b);
        allocated = id + 1;
        return id;
    }

    /** Returns buffer {@code id} (any thread). */
    public void release(int id) {
        if (id < 0 || id >= allocated || !free.offer(id)) {
            throw new IllegalStateException("more buffers returned than lent (buffer " + id + ")");
        }
    }

    public ByteBuffer buffer(int id) {
        return buffers[id];
    }

    public long address(int id) {
        return addresses[id];
    }

    /** The most buffers this pool may hold ({@code count}). */
    public int size() {
        return buffers.length;
    }

    /** Buffers allocated so far (at most {@link #size}). */
    public int allocated() {
        return allocated;
    }

    /** Direct memory the allocated buffers hold. */
    public long allocatedBytes() {
        return (long) allocated * size;
    }

    /** Times the pool could not grow because the JVM's direct memory was used up. */
    public long refused() {
        return refused;
    }

    /**
     * Puts {@code recv_pool_buffers} (allocated), {@code recv_pool_bytes}
     * (their direct memory; the engine's statistics use the same name) and
     * {@code recv_pool_refused} (see {@link #refused}) into a transport's statistics.
     */
    public void putStats(java.util.Map<String, Long> m) {
        m.put("recv_pool_buffers", (long) allocated);
        m.put("recv_pool_bytes", allocatedBytes());
        m.put("recv_pool_refused", refused);
    }

    /** What sized this pool (the settings), for messages. */
    public String what() {
        return what;
    }
}
