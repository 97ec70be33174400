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

    // The event kinds, as the native library defines them (see NativeLayout).
    int EVENT_DISCOVERED = (int) NativeLayout.constant("EVENT_DISCOVERED");
    int EVENT_INVALIDATED = (int) NativeLayout.constant("EVENT_INVALIDATED");
    int EVENT_DISCONNECTED = (int) NativeLayout.constant("EVENT_DISCONNECTED");
    /** An established connection was closed in order (eviction, replacement): not a failure. */
    int EVENT_CLOSED = (int) NativeLayout.constant("EVENT_CLOSED");
    /** Data in flight on a connection closed in order did not arrive (the node's requests fail). */
    int EVENT_LOST = (int) NativeLayout.constant("EVENT_LOST");
    /**
     * The peer shut down: as {@link #EVENT_DISCONNECTED}, and {@code value} is
     * how many bytes we sent on the connection it handled beyond its last
     * flow-control confirmation ({@link #LEFT_HANDLED_UNKNOWN}: it did not say).
     */
    int EVENT_LEFT = (int) NativeLayout.constant("EVENT_LEFT");
    /** The value of an {@link #EVENT_LEFT} whose peer did not say what it handled (negative). */
    long LEFT_HANDLED_UNKNOWN = NativeLayout.constant("LEFT_HANDLED_UNKNOWN");
}
