package io.ibdxnet.transport;

import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.Pages;
import java.nio.ByteBuffer;

/**
 * The memory of one Java transport's outgoing ring (nio, loopback): zero
 * bytes, committed as they are first written. On JDK 22+ an anonymous
 * private mapping ({@link Pages}): a fresh ring costs nothing resident, and
 * {@link OutgoingRingBuffer#releaseIfIdle} gives an idle ring's pages back
 * (they read as zero again, which the ring's zero-word protocol needs).
 * Without it (JDK 17–21) a direct buffer, zeroed and so resident in full
 * from the start, and nothing to give back.
 *
 * <p>Lifetime: the mapping is unmapped only when {@link #buffer} and every
 * view of it are unreachable (the JDK's automatic arena, see
 * {@link Pages#map}), never explicitly. Whoever touches the memory by
 * address holds this object (the ring does, and a sender holds its
 * connection, hence the ring, until it has published), so a late writer can
 * never meet unmapped memory: unmapping early instead would need every
 * writer, the selector's socket writes and the pump's copies proven done.
 */
public final class RingMemory {
    /** The whole ring; transports take their views with {@code duplicate()}. */
    public final ByteBuffer buffer;
    final long address;
    final int size;
    /** Gives the pages back (null: cannot). */
    private final Runnable releasePages;

    RingMemory(ByteBuffer buffer, Runnable releasePages) {
        this.buffer = buffer;
        this.address = Memory.address(buffer);
        this.size = buffer.capacity();
        this.releasePages = releasePages;
    }

    /**
     * {@code bytes} of ring memory for {@code what} (e.g. {@code "the ring of
     * the connection to node 3 (nioRingSize = 4194304)"}); an
     * {@link IllegalStateException} naming {@code what} and the size when it
     * cannot be had.
     */
    public static RingMemory allocate(int bytes, String what) {
        if (!Pages.available()) {
            return new RingMemory(DirectMemory.allocate(bytes, what), null);
        }
        return mapped(bytes, what);
    }

    /** Mapped memory ({@link Pages#available} must be true); {@code bytes} beyond an int fail as the kernel refuses. */
    static RingMemory mapped(long bytes, String what) {
        ByteBuffer b;
        try {
            b = Pages.map(bytes);
        } catch (IllegalStateException e) {
            throw new IllegalStateException(what + " cannot be mapped: " + e.getMessage(), e);
        }
        long a = Memory.address(b);
        return new RingMemory(b, () -> Pages.release(a, bytes));
    }

    /** True for mapped memory: its pages can be given back. */
    public boolean releasable() {
        return releasePages != null;
    }

    /** Gives the pages back; the caller excludes every writer (see {@link OutgoingRingBuffer#releaseIfIdle}). */
    void releasePages() {
        releasePages.run();
    }

    /** Bytes resident now (whole pages): the size for direct memory, -1 if it cannot be told. */
    public long resident() {
        return releasable() ? Pages.resident(address, size) : size;
    }
}
