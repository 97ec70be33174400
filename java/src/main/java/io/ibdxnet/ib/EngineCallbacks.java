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
     * Job thread: {@code kind} is one of {@link NodeEvents} ({@code DISCOVERED},
     * {@code INVALIDATED}, {@code DISCONNECTED}, {@code CLOSED}, {@code LOST},
     * {@code LEFT}); {@code value} is 0 except for {@link NodeEvents#LEFT}.
     */
    void nodeEvent(int kind, int nodeId, long value);
}
