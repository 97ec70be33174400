package io.ibdxnet.transport;

import io.ibdxnet.NetworkException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What every transport keeps per outgoing connection: the ring senders write
 * frames into, the flow-control window, and the senders inside the ring (the
 * ring must outlive them). {@link #write} is the one send path.
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
    public static long unconfirmed(java.util.concurrent.atomic.AtomicReferenceArray<? extends RingConnection> table) {
        long sum = 0;
        for (int i = 0; i < table.length(); i++) {
            RingConnection c = table.get(i);
            if (c != null) {
                sum += Math.max(0, c.flow.unconfirmed());
            }
        }
        return sum;
    }

    /** The frame size check every transport makes before sending. */
    public static void checkFrame(byte[] header, int length, int maxFrame) {
        int total = header.length + length;
        if (header.length < 4 || total > maxFrame) {
            throw new IllegalArgumentException("frame of " + total + " bytes exceeds " + maxFrame);
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
        try {
            // What the record occupies on the wire (aligned), as the receiver counts it:
            // its final confirmation on shutdown is then exact to the byte.
            flow.acquire(io.ibdxnet.transport.OutgoingRingBuffer.aligned(header.length + length), deadlineNanos, node,
                    orb::isClosed);
            writers.incrementAndGet();
            try {
                orb.writeRecord(header, payload, offset, length, deadlineNanos);
            } finally {
                writers.decrementAndGet();
            }
            return true;
        } catch (NetworkException | IllegalStateException e) {
            if (orderly && retry) {
                return false;
            }
            throw e instanceof NetworkException ? (NetworkException) e
                    : new NetworkException("connection to node " + node + " closed", e);
        } catch (TimeoutException e) {
            throw new NetworkException("send to node " + node + " timed out: " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new NetworkException("interrupted while sending to node " + node, e);
        }
    }
}
