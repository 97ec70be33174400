package io.ibdxnet.ib;

/**
 * What the native engine calls, from its own (daemon) threads. Arguments are
 * addresses of native structs; map them with the flyweights of this package.
 * Each method runs once per engine loop iteration, so keep them short and
 * allocation free. An exception thrown here is logged natively and treated as
 * "nothing to send" / "nothing consumed"; the engine keeps running.
 */
public interface EngineCallbacks {
    /**
     * Send thread: results of the previous package and the confirmations since;
     * write the next package into {@code nextAddress} (flags 0 = nothing to send).
     */
    void nextDataToSend(long prevResultsAddress, long completedListAddress, long nextAddress);

    /** Receive thread: returns how many entries, from the ring's front, were consumed. */
    int received(long incomingRingAddress);

    /**
     * Job thread: {@link #EVENT_DISCOVERED}, {@link #EVENT_INVALIDATED},
     * {@link #EVENT_DISCONNECTED}, {@link #EVENT_CLOSED}, {@link #EVENT_LOST} or
     * {@link #EVENT_LEFT}; {@code value} is 0 except for {@link #EVENT_LEFT}.
     */
    void nodeEvent(int kind, int nodeId, long value);

    int EVENT_DISCOVERED = 1;
    int EVENT_INVALIDATED = 2;
    int EVENT_DISCONNECTED = 3;
    /** An established connection was closed in order (eviction, replacement): not a failure. */
    int EVENT_CLOSED = 4;
    /** Data in flight on a connection closed in order did not arrive (the node's requests fail). */
    int EVENT_LOST = 5;
    /**
     * The peer shut down: as {@link #EVENT_DISCONNECTED}, and {@code value} is
     * how many bytes we sent on the connection it handled beyond its last
     * flow-control confirmation (-1: it did not say).
     */
    int EVENT_LEFT = 6;
}
