package io.ibdxnet.transport;

import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Receiver side of flow control: counts bytes the core has processed per
 * node and turns them into confirmation units ({@code window × threshold}
 * bytes each) owed to the sender. Never blocks.
 */
public final class Confirmations {
    private static final int NODES = NodeId.COUNT;
    private final long unit;
    private final AtomicLongArray unconfirmed = new AtomicLongArray(NODES);
    private final AtomicIntegerArray owed = new AtomicIntegerArray(NODES);

    public Confirmations(long unit) {
        this.unit = unit;
    }

    /** Bytes per unit for a window and threshold (checked). */
    public static long unit(long window, double threshold) {
        if (window <= 0 || !(threshold > 0 && threshold <= 1)) {
            throw new IllegalArgumentException("flow control window must be positive and threshold in (0, 1]");
        }
        return Math.max(1, (long) (window * threshold));
    }

    public long unit() {
        return unit;
    }

    /** {@code bytes} from {@code node} were processed; true if a new unit is owed. */
    public boolean consumed(int node, int bytes) {
        long r = unconfirmed.addAndGet(node, bytes);
        if (r < unit) {
            return false;
        }
        long units = r / unit;
        unconfirmed.addAndGet(node, -units * unit);
        owed.addAndGet(node, (int) units);
        return true;
    }

    /** Units owed to {@code node} (at most {@code max}), to be sent. */
    public int owed(int node, int max) {
        return Math.min(Math.max(owed.get(node), 0), max);
    }

    /** {@code units} were sent to {@code node}. */
    public void sent(int node, int units) {
        owed.addAndGet(node, -units);
    }

    /**
     * Bytes from {@code node} processed beyond the units owed or sent: what a
     * final confirmation adds when this node shuts down.
     */
    public long residue(int node) {
        return unconfirmed.get(node);
    }

    /** Forgets what {@code node} sent so far (its connection was replaced). */
    public void reset(int node) {
        unconfirmed.set(node, 0);
        owed.set(node, 0);
    }
}
