package io.ibdxnet.ib;

/**
 * What the native engine calls, from its own (daemon) threads. Arguments are
 * addresses of native structs; map them with the flyweights of this package.
 * Each method runs once per engine loop iteration, so keep them short and
 * allocation free. An exception thrown here is counted and logged natively and
 * treated as "nothing to send" / "nothing consumed"; the engine keeps running.
 *
 * <p>The two per-iteration methods return a value that is never 0 when they
 * return normally ({@link #OK}, {@link #consumed(int)}): 0 is what the JVM hands
 * the library when an exception escapes, and only then does the library pay for
 * the JNI exception check.
 */
public interface EngineCallbacks {
    /** What {@link #nextDataToSend} returns (anything but 0). */
    int OK = 1;

    /** What {@link #received} returns when it consumed {@code entries} entries: {@code entries + 1}. */
    static int consumed(int entries) {
        return entries + 1;
    }

    /**
     * Send thread: results of the previous package and the confirmations since;
     * write the next package into {@code nextAddress} (flags 0 = nothing to send).
     * Returns {@link #OK}. Mark each confirmation applied ({@link
     * CompletedWorkList#markApplied}), the previous package's results too
     * ({@link CompletedWorkList#markPrevApplied}), and acknowledge the whole
     * hand-over last ({@link CompletedWorkList#acknowledge}): until then the
     * engine hands the unapplied rest again and posts no package.
     */
    int nextDataToSend(long prevResultsAddress, long completedListAddress, long nextAddress);

    /**
     * Receive thread: returns {@link #consumed(int) consumed(n)} for the n entries,
     * from the ring's front, it consumed ({@code consumed(0)} for none).
     */
    int received(long incomingRingAddress);

    /**
     * Job thread: {@code kind} is one of {@link NodeEvents} ({@code DISCOVERED},
     * {@code INVALIDATED}, {@code DISCONNECTED}, {@code CLOSED}, {@code LOST},
     * {@code LEFT}); {@code value} is 0 except for {@link NodeEvents#LEFT}.
     */
    void nodeEvent(int kind, int nodeId, long value);
}
