package io.ibdxnet.core;

import static io.ibdxnet.ib.UnsafeAccess.UNSAFE;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The outgoing ring buffer (ORB) of one connection, over the connection's
 * native send ring, extended with the <em>front posted</em> pointer (paper
 * §8.2). Positions are absolute byte counts; the ring index is
 * {@code position & mask}.
 *
 * <pre>
 *   front ........ frontPosted ........ back ........ reserved ........ front + capacity
 *   posted, not confirmed | ready, not posted | being written | free
 * </pre>
 *
 * Many threads serialize concurrently and lock-free: {@link #reserve} claims
 * space with a CAS on {@code reserved}; {@link #commit} publishes it, in
 * reservation order, by advancing {@code back}. Only the send thread moves
 * {@code frontPosted} ({@link #posted}) and {@code front} ({@link #confirmed}).
 */
public final class OutgoingRingBuffer {
    private final long address;
    private final int capacity;
    private final long mask;
    private final AtomicLong reserved = new AtomicLong();
    private volatile long back;
    private volatile long front;
    private long frontPosted;
    private volatile boolean closed;

    /** A ring over {@code capacity} bytes (a power of two) of native memory at {@code address}. */
    public OutgoingRingBuffer(long address, int capacity) {
        if (capacity <= 0 || Integer.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("ring capacity " + capacity + " is not a power of two");
        }
        this.address = address;
        this.capacity = capacity;
        this.mask = capacity - 1;
    }

    public int capacity() {
        return capacity;
    }

    /**
     * Claims {@code length} bytes, waiting (spinning, then parking) while the
     * ring is full. Returns the start position, to be passed to
     * {@link #write} and {@link #commit}. Fails if {@code length} exceeds the
     * capacity or {@code deadlineNanos} (a {@link System#nanoTime} value)
     * passes first.
     */
    public long reserve(int length, long deadlineNanos) throws InterruptedException, java.util.concurrent.TimeoutException {
        if (length <= 0 || length > capacity) {
            throw new IllegalArgumentException("cannot reserve " + length + " bytes in a ring of " + capacity);
        }
        int spins = 0;
        while (true) {
            if (closed) {
                throw new IllegalStateException("connection closed");
            }
            long r = reserved.get();
            if (r + length - front <= capacity) {
                if (reserved.compareAndSet(r, r + length)) {
                    return r;
                }
                continue;
            }
            if (++spins > 100) {
                if (Thread.interrupted()) {
                    throw new InterruptedException();
                }
                if (System.nanoTime() - deadlineNanos > 0) {
                    throw new java.util.concurrent.TimeoutException("send ring full: nothing confirmed in time");
                }
                LockSupport.parkNanos(10_000);
            } else {
                Thread.onSpinWait();
            }
        }
    }

    /** Copies {@code length} bytes of {@code src} from {@code offset} to ring position {@code position}. */
    public void write(long position, byte[] src, int offset, int length) {
        long index = position & mask;
        int first = (int) Math.min(length, capacity - index);
        UNSAFE.copyMemory(src, UNSAFE.arrayBaseOffset(byte[].class) + offset, null, address + index, first);
        if (first < length) {
            UNSAFE.copyMemory(src, UNSAFE.arrayBaseOffset(byte[].class) + offset + first, null, address, length - first);
        }
    }

    /** Writes one byte at ring position {@code position}. */
    public void putByte(long position, byte b) {
        UNSAFE.putByte(address + (position & mask), b);
    }

    /** Publishes {@code [start, start + length)} once every earlier reservation is published. */
    public void commit(long start, int length) {
        // Predecessors are mid-copy: spin briefly, then yield so a preempted
        // predecessor gets the CPU (2-core machines have more writers than cores).
        int spins = 0;
        while (back != start) {
            if (++spins < 64) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
        back = start + length;
    }

    /** Fails current and future reservations (the connection is gone). */
    public void close() {
        closed = true;
    }

    public boolean isClosed() {
        return closed;
    }

    // ---- send thread only ----

    /** Bytes committed and not yet posted. */
    public long readyToPost() {
        return back - frontPosted;
    }

    /** Ring offset where the next data to post starts. */
    public int postOffset() {
        return (int) (frontPosted & mask);
    }

    /** The engine posted {@code n} more bytes. */
    public void posted(long n) {
        frontPosted += n;
    }

    /** The engine confirmed {@code n} more bytes sent: their space is free again. */
    public void confirmed(long n) {
        front = front + n;
    }

    /** Bytes posted and not yet confirmed. */
    public long inFlight() {
        return frontPosted - front;
    }

    /** True if everything written was confirmed. */
    public boolean isDrained() {
        return front == reserved.get();
    }
}
