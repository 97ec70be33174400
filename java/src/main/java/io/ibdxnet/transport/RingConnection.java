package io.ibdxnet.transport;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What every transport keeps per outgoing connection: the ring senders write
 * frames into, the flow-control window, and the senders inside the ring (the
 * ring must outlive them). {@link #write} copies a frame in;
 * {@link #reserve} and {@link #publish} let the caller write it in place.
 */
public class RingConnection {
    public final int node;
    public final OutgoingRingBuffer orb;
    public final FlowWindow flow;
    /** Senders between reserve and publish. */
    public final AtomicInteger writers = new AtomicInteger();
    /** Closed on purpose (eviction, goodbye): senders that had not written retry on a new connection. */
    public volatile boolean orderly;

    protected RingConnection(int node, OutgoingRingBuffer orb, FlowWindow flow) {
        this.node = node;
        this.orb = orb;
        this.flow = flow;
    }

    /** Bytes sent and not yet confirmed over a transport's connection table (a gauge, not a hot path). */
    public static long unconfirmed(NodeRefs<? extends RingConnection> table) {
        long sum = 0;
        for (int i = 0; i < table.length(); i++) {
            RingConnection c = table.get(i);
            if (c != null) {
                sum += Math.max(0, c.flow.unconfirmed());
            }
        }
        return sum;
    }

    /**
     * Waits up to {@code timeoutMs} until {@code left} holds for the ring of
     * every connection in {@code table} that is not closed (what senders
     * published there has left this node); true if it did. A poll every
     * millisecond: only for a close.
     */
    public static boolean awaitLeft(NodeRefs<? extends RingConnection> table,
            java.util.function.Predicate<OutgoingRingBuffer> left, long timeoutMs) throws InterruptedException {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (true) {
            boolean all = true;
            for (int i = 0; i < table.length() && all; i++) {
                RingConnection c = table.get(i);
                all = c == null || c.orb == null || c.orb.isClosed() || left.test(c.orb);
            }
            if (all) {
                return true;
            }
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
            Thread.sleep(1);
        }
    }

    /**
     * Bytes of ring memory resident now over a transport's connection table
     * (whole pages, {@link OutgoingRingBuffer#resident}; rings that cannot
     * tell count nothing). A gauge: one {@code mincore} per mapped ring.
     */
    public static long ringResident(NodeRefs<? extends RingConnection> table) {
        long sum = 0;
        for (int i = 0; i < table.length(); i++) {
            RingConnection c = table.get(i);
            if (c != null && c.orb != null) {
                sum += Math.max(0, c.orb.resident());
            }
        }
        return sum;
    }

    /** The frame size check every transport makes before sending. */
    public static void checkFrame(byte[] header, int length, int maxFrame) {
        if (header.length < 4) {
            throw new IllegalArgumentException("frame header of " + header.length + " bytes has no length word");
        }
        checkFrame(header.length + length, maxFrame);
    }

    /** The same for a frame of {@code total} bytes written in place. */
    public static void checkFrame(int total, int maxFrame) {
        if (total < 4 || total > maxFrame) {
            throw new IllegalArgumentException("frame of " + total + " bytes is not within [4, " + maxFrame + "]");
        }
    }

    /**
     * Waits for the window, then writes {@code header} and the payload as one
     * record. Returns false if the connection was closed in order before the
     * frame was written (and {@code retry} allows another connection): the
     * caller sends it again on the next one. Any other end is an exception.
     */
    public final boolean write(byte[] header, byte[] payload, int offset, int length, long deadlineNanos, boolean retry)
            throws NetworkException {
        int total = header.length + length;
        return writeAt(claim(total, deadlineNanos, retry), header, payload, offset, length);
    }

    /** Writes and publishes a frame at {@code pos} (claimed; nothing if negative) and ends the claim. */
    private boolean writeAt(long pos, byte[] header, byte[] payload, int offset, int length) {
        if (pos < 0) {
            return false;
        }
        try {
            orb.write(pos + 4, header, 4, header.length - 4);
            orb.write(pos + header.length, payload, offset, length);
            orb.publish(pos, header.length + length);
            published(header.length + length);
        } finally {
            writers.decrementAndGet();
        }
        return true;
    }

    /**
     * Like {@link #write}, but the record of {@code length} bytes is only
     * reserved, for the caller to write in place and then {@link #publish}.
     * False, with nothing reserved, where {@link #write} returns false.
     */
    public final boolean reserve(int length, long deadlineNanos, boolean retry, RingRecord record) throws NetworkException {
        long pos = claim(length, deadlineNanos, retry);
        if (pos < 0) {
            return false;
        }
        record.reserved(this, pos, length);
        return true;
    }

    /**
     * {@link #reserve} without waiting: false, with nothing reserved, when
     * the window or the ring has no room right now or the connection is
     * closed (the caller then takes the waiting path, which says why).
     */
    public final boolean tryReserve(int length, RingRecord record) {
        long pos = tryClaim(length);
        if (pos < 0) {
            return false;
        }
        record.reserved(this, pos, length);
        return true;
    }

    /** {@link #write} without waiting: false, with nothing written, where {@link #tryReserve} is false. */
    public final boolean tryWrite(byte[] header, byte[] payload, int offset, int length) {
        return writeAt(tryClaim(header.length + length), header, payload, offset, length);
    }

    /** {@link #claim} without waiting: the position, or -1 with nothing taken. */
    private long tryClaim(int length) {
        int bytes = OutgoingRingBuffer.aligned(length);
        if (orderly || !flow.tryAcquire(bytes)) {
            return -1;
        }
        writers.incrementAndGet();
        long pos = orb.tryReserve(length);
        if (pos < 0) {
            writers.decrementAndGet();
            flow.release(bytes);
            return -1;
        }
        return pos;
    }

    /** Publishes {@code record} (reserved on this connection) and lets the ring go. */
    public final void publish(RingRecord record) {
        try {
            orb.publish(record.start(), record.length());
            published(record.length());
        } finally {
            record.clear();
            writers.decrementAndGet();
        }
    }

    /**
     * A record of {@code length} bytes was published: tell whoever sends the ring (the transport's
     * own hook). Runs while this sender still counts in {@link #writers}, so
     * a transport that waits out the writers before it closes knows no hook
     * is running any more.
     */
    protected void published(int length) {}

    /**
     * The window, then the ring: the record's start position with this
     * sender counted in {@link #writers}, or -1 (see {@link #write}).
     */
    private long claim(int length, long deadlineNanos, boolean retry) throws NetworkException {
        try {
            // What the record occupies on the wire (aligned), as the receiver counts it:
            // its final confirmation on shutdown is then exact to the byte.
            int bytes = OutgoingRingBuffer.aligned(length);
            flow.acquire(bytes, deadlineNanos, node, orb::isClosed);
            writers.incrementAndGet();
            boolean claimed = false;
            try {
                long pos = orb.reserve(length, deadlineNanos);
                claimed = pos != OutgoingRingBuffer.CLOSED;
                if (claimed) {
                    return pos;
                }
            } finally {
                if (!claimed) {
                    writers.decrementAndGet();
                    flow.release(bytes); // nothing went out: the window must not keep it
                }
            }
            throw new NetworkException(FailureReason.DISCONNECTED, "connection to node " + node + " closed");
        } catch (NetworkException e) {
            if (orderly && retry) {
                return -1;
            }
            throw e;
        } catch (RingMemory.CommitFailed e) {
            // the ring's memory (a file in a full tmpfs) cannot grow: nothing was reserved
            throw new NetworkException(FailureReason.RESOURCES, e.getMessage(), e);
        } catch (TimeoutException e) {
            throw new NetworkException(FailureReason.TIMEOUT, "send to node " + node + " timed out: " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new NetworkException(FailureReason.INTERRUPTED, "interrupted while sending to node " + node, e);
        }
    }
}
