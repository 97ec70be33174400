package io.ibdxnet.transport;

/**
 * Receiver side of flow control: counts bytes the core is done with per node
 * (their messages handled, see {@link Transport#consumed}) and turns them
 * into confirmation units owed to the sender. A unit is
 * the <em>sender's</em> {@code window × threshold}, told to us when its
 * connection was set up ({@link #reset(int, long)}): nodes with different
 * settings then confirm each other exactly (in our own unit the sender would
 * be over- or under-credited). Never blocks.
 */
public final class Confirmations {
    /**
     * Smallest unit a peer may name (and we may use): smaller ones would make
     * us send a confirmation every few bytes (ib carries 255 units at most per
     * message).
     */
    public static final long MIN_UNIT = 64;
    /** Largest unit a peer may name (and we may use): byte counts in it cannot overflow. */
    public static final long MAX_UNIT = 1L << 62;
    private final long unit;
    /** Per node: the unit of its current connection (its sender's); 0: ours, until it names one. */
    private final NodeLongs units = new NodeLongs();
    private final NodeLongs unconfirmed = new NodeLongs();
    private final NodeLongs owed = new NodeLongs();

    /** {@code unit}: our own, what we send is confirmed in (and the default for a peer). */
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

    /**
     * Whether a unit a peer named is one we accept: in [{@link #MIN_UNIT},
     * {@link #MAX_UNIT}]. It only decides when we confirm; what we buffer
     * stays bounded by our own receive limits whatever it is.
     */
    public static boolean acceptable(long unit) {
        return unit >= MIN_UNIT && unit <= MAX_UNIT;
    }

    /** Our own unit (what we send is confirmed in). */
    public long unit() {
        return unit;
    }

    /** The unit we confirm {@code node}'s bytes in. */
    public long unit(int node) {
        long u = units.get(node);
        return u == 0 ? unit : u;
    }

    /** {@code bytes} from {@code node} were handled; true if a new unit is owed. Any thread. */
    public boolean consumed(int node, int bytes) {
        // Handler threads and the coordinator call this at once for one node:
        // the units are taken off in the same atomic step as the bytes go in,
        // so no unit is owed twice.
        long u = unit(node);
        long n;
        while (true) {
            long before = unconfirmed.get(node);
            long r = before + bytes;
            n = r < u ? 0 : r / u;
            if (unconfirmed.compareAndSet(node, before, r - n * u)) {
                break;
            }
        }
        if (n == 0) {
            return false;
        }
        owed.addAndGet(node, n);
        return true;
    }

    /**
     * Takes every unit owed to {@code node} at once (to be sent now): for
     * callers that may run on several threads at once (loopback).
     */
    public int take(int node) {
        while (true) {
            long o = owed.get(node);
            if (o <= 0) {
                return 0;
            }
            int n = (int) Math.min(o, Integer.MAX_VALUE);
            if (owed.compareAndSet(node, o, o - n)) {
                return n;
            }
        }
    }

    /** Units owed to {@code node} (at most {@code max}), to be sent. */
    public int owed(int node, int max) {
        return (int) Math.min(Math.max(owed.get(node), 0), max);
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

    /** Forgets what {@code node} sent so far (its connection was replaced); its unit stays. */
    public void reset(int node) {
        unconfirmed.set(node, 0);
        owed.set(node, 0);
    }

    /**
     * Forgets what {@code node} sent so far: its new connection's bytes are
     * confirmed in {@code peerUnit}, the unit the sender named (checked by
     * the transport with {@link #acceptable}).
     */
    public void reset(int node, long peerUnit) {
        if (!acceptable(peerUnit)) {
            throw new IllegalArgumentException("flow-control unit " + peerUnit + " of node " + node + " is not in ["
                    + MIN_UNIT + ", " + MAX_UNIT + "]");
        }
        units.set(node, peerUnit);
        reset(node);
    }
}
