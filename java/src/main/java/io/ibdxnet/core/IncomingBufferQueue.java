package io.ibdxnet.core;

import io.ibdxnet.transport.IncomingBuffer;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The incoming buffer queue (paper §2.3): received buffers wait here for the
 * message creation coordinator, bounded by count and by bytes. A full queue
 * refuses buffers, which stay in the transport (backpressure down to the
 * network: receiver not ready).
 */
public final class IncomingBufferQueue {
    private static final long IDLE_YIELD_NANOS = 50_000;
    private final ArrayBlockingQueue<IncomingBuffer> queue;
    private final long maxBytes;
    private final AtomicLong bytes = new AtomicLong();

    public IncomingBufferQueue(int maxBuffers, long maxBytes) {
        this.queue = new ArrayBlockingQueue<>(maxBuffers);
        this.maxBytes = maxBytes;
    }

    /** Adds a buffer unless the queue is full (by count or bytes); never blocks. */
    public boolean offer(IncomingBuffer b) {
        long now = bytes.addAndGet(b.length);
        if (now > maxBytes && now != b.length) {
            bytes.addAndGet(-b.length);
            return false;
        }
        if (!queue.offer(b)) {
            bytes.addAndGet(-b.length);
            return false;
        }
        return true;
    }

    /**
     * The oldest buffer, waiting up to {@code timeoutMs}; null if none came.
     * Yields for a moment before blocking: a blocked consumer costs the
     * producer a wake-up system call and the next buffer a scheduling delay.
     */
    public IncomingBuffer poll(long timeoutMs) throws InterruptedException {
        IncomingBuffer b = queue.poll();
        long idle = System.nanoTime();
        while (b == null && System.nanoTime() - idle < IDLE_YIELD_NANOS) {
            Thread.yield();
            b = queue.poll();
        }
        if (b == null) {
            b = queue.poll(timeoutMs, TimeUnit.MILLISECONDS);
        }
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
