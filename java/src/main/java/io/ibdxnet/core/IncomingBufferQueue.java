package io.ibdxnet.core;

import io.ibdxnet.transport.IncomingBuffer;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The incoming buffer queue (paper §2.3): received buffers wait here for the
 * message creation coordinator, bounded by count and by bytes. A full queue
 * refuses buffers, which stay in the transport (backpressure down to the
 * network: receiver not ready).
 */
public final class IncomingBufferQueue {
    private final ArrayBlockingQueue<IncomingBuffer> queue;
    private final long maxBytes;
    private final AtomicLong bytes = new AtomicLong();
    /** Made once: a method reference per poll would allocate per buffer. */
    private final java.util.function.Supplier<IncomingBuffer> pollQueue;
    /** The (one) consumer's last poll found nothing. */
    private boolean timedOut;
    /** Buffers offered and not yet {@link #finished}: in the queue or being handled. */
    private final AtomicInteger unfinished = new AtomicInteger();

    public IncomingBufferQueue(int maxBuffers, long maxBytes) {
        this.queue = new ArrayBlockingQueue<>(maxBuffers);
        this.pollQueue = queue::poll;
        this.maxBytes = maxBytes;
    }

    /** Adds a buffer unless the queue is full (by count or bytes); never blocks. */
    public boolean offer(IncomingBuffer b) {
        long now = bytes.addAndGet(b.length);
        if (now > maxBytes && now != b.length) {
            bytes.addAndGet(-b.length);
            return false;
        }
        unfinished.incrementAndGet();
        if (!queue.offer(b)) {
            unfinished.decrementAndGet();
            bytes.addAndGet(-b.length);
            return false;
        }
        return true;
    }

    /** The consumer handled a buffer it took. */
    public void finished() {
        unfinished.decrementAndGet();
    }

    /** True if every buffer offered was taken and handled. */
    public boolean idle() {
        return unfinished.get() == 0;
    }

    /**
     * The oldest buffer, waiting up to {@code timeoutMs}; null if none came.
     * One consumer thread only.
     * Yields for a moment before blocking ({@link IdleYield}).
     */
    public IncomingBuffer poll(long timeoutMs) throws InterruptedException {
        // Yield only right after work: a consumer whose last wait timed out
        // blocks at once (an idle node must not yield 50 µs per timeout).
        IncomingBuffer b = timedOut ? queue.poll() : IdleYield.poll(pollQueue);
        if (b == null) {
            b = queue.poll(timeoutMs, TimeUnit.MILLISECONDS);
        }
        timedOut = b == null;
        if (b != null) {
            bytes.addAndGet(-b.length);
        }
        return b;
    }

    public int size() {
        return queue.size();
    }

    public long bytes() {
        return bytes.get();
    }
}
