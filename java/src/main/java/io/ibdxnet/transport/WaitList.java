package io.ibdxnet.transport;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * Threads parked until a state they wait for changes (room in a ring or a
 * flow control window), woken by whoever changes it. The changer calls
 * {@link #signal} after its change: one volatile read when nobody waits.
 * A waiter registers, then checks its condition, then parks; the changer
 * changes, then looks for waiters: one of the two always sees the other, so
 * no wake-up is lost. Parks are still bounded (the caller's time), which
 * covers changes that do not signal (a connection closing).
 */
public final class WaitList {
    private final ConcurrentLinkedQueue<Thread> parked = new ConcurrentLinkedQueue<>();
    private final AtomicInteger waiting = new AtomicInteger();
    /** Waiters a signal unparked (a signal to nobody costs nothing and counts nothing). */
    private final java.util.concurrent.atomic.AtomicLong woken = new java.util.concurrent.atomic.AtomicLong();

    /** After a change a waiter may wait for: wakes every parked waiter. */
    public void signal() {
        if (waiting.get() == 0) {
            return;
        }
        for (Thread t; (t = parked.poll()) != null;) {
            LockSupport.unpark(t);
            woken.incrementAndGet();
        }
    }

    /** Parks the calling thread for up to {@code nanos} unless {@code ready} holds (or becomes true and is signalled). */
    public void park(long nanos, BooleanSupplier ready) {
        Thread me = Thread.currentThread();
        waiting.incrementAndGet();
        parked.add(me);
        try {
            if (!ready.getAsBoolean()) {
                LockSupport.parkNanos(this, nanos);
            }
        } finally {
            parked.remove(me);
            waiting.decrementAndGet();
        }
    }

    /** Waiters a signal unparked so far (for tests). */
    long woken() {
        return woken.get();
    }

    /** Waiters right now (for tests). */
    int waiting() {
        return waiting.get();
    }
}
