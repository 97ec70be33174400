package io.ibdxnet.transport;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Bounded lock-free multi-producer multi-consumer queue of ints (Vyukov's
 * bounded MPMC queue: a sequence number per slot says whose turn it is).
 * A consumer that claimed a slot but has not yet released it (preempted
 * between the two) blocks that slot: producers reaching it one lap later
 * wait for it instead of reporting the queue full, because it is not.
 */
public final class IntQueue {
    private final int mask;
    private final AtomicLongArray seq;
    private final int[] values;
    private final AtomicLong head = new AtomicLong();
    private final AtomicLong tail = new AtomicLong();

    /** Room for at least {@code capacity} values (rounded up to a power of two). */
    public IntQueue(int capacity) {
        int cap = Integer.highestOneBit(Math.max(2, capacity) - 1) << 1;
        mask = cap - 1;
        seq = new AtomicLongArray(cap);
        values = new int[cap];
        for (int i = 0; i < cap; i++) {
            seq.set(i, i);
        }
    }

    /** Appends {@code v}; false if full ({@code capacity} values queued). */
    public boolean offer(int v) {
        long pos = tail.get();
        while (true) {
            int i = (int) (pos & mask);
            long d = seq.get(i) - pos;
            if (d == 0) {
                if (tail.compareAndSet(pos, pos + 1)) {
                    values[i] = v;
                    seq.set(i, pos + 1); // publishes values[i]
                    return true;
                }
                pos = tail.get();
            } else if (d < 0) {
                if (pos - head.get() > mask) {
                    return false; // full
                }
                // Not full: the slot's consumer is between claiming and
                // releasing it; give it the processor.
                Thread.yield();
                pos = tail.get();
            } else {
                pos = tail.get();
            }
        }
    }

    /** Removes the oldest value, or returns {@code -1} if empty (values must be non-negative). */
    public int poll() {
        long pos = head.get();
        while (true) {
            int i = (int) (pos & mask);
            long d = seq.get(i) - (pos + 1);
            if (d == 0) {
                if (head.compareAndSet(pos, pos + 1)) {
                    int v = values[i];
                    seq.set(i, pos + mask + 1);
                    return v;
                }
                pos = head.get();
            } else if (d < 0) {
                return -1;
            } else {
                pos = head.get();
            }
        }
    }

    /** True if no value is queued (an offer in progress may already count as queued). */
    public boolean isEmpty() {
        return tail.get() == head.get();
    }
}
