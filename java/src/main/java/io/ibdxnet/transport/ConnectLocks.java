package io.ibdxnet.transport;

/**
 * Senders that create a connection to the same node meet on one lock (64
 * stripes: a lock per node would be 65 536 objects, one global lock would
 * make a slow connect to one node hold up connects to all others).
 */
public final class ConnectLocks {
    private final Object[] stripes = new Object[64];

    public ConnectLocks() {
        for (int i = 0; i < stripes.length; i++) {
            stripes[i] = new Object();
        }
    }

    /** The lock to hold while creating the connection to {@code node}. */
    public Object of(int node) {
        return stripes[node & (stripes.length - 1)];
    }
}
