package io.ibdxnet.transport;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Senders that create a connection to the same node meet on one lock (64
 * stripes: a lock per node would be 65 536 objects, one global lock would
 * make a slow connect to one node hold up connects to all others). A sender
 * waits for the lock only until its own deadline: a slow connect by another
 * caller must not keep it past its time.
 */
public final class ConnectLocks {
    private final ReentrantLock[] stripes = new ReentrantLock[64];

    public ConnectLocks() {
        for (int i = 0; i < stripes.length; i++) {
            stripes[i] = new ReentrantLock();
        }
    }

    private ReentrantLock of(int node) {
        return stripes[node & (stripes.length - 1)];
    }

    /** Takes the lock for {@code node}, however long that takes. */
    public void lock(int node) {
        of(node).lock();
    }

    /** Takes the lock for {@code node}; false if {@code deadlineNanos} ({@link System#nanoTime}) passes first. */
    public boolean lock(int node, long deadlineNanos) throws InterruptedException {
        ReentrantLock l = of(node);
        return l.tryLock() || l.tryLock(Math.max(0, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
    }

    /** Lets the lock for {@code node} go. */
    public void unlock(int node) {
        of(node).unlock();
    }
}
