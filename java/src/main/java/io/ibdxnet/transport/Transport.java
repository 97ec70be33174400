package io.ibdxnet.transport;

import io.ibdxnet.NetworkException;

/**
 * Moves frames to other nodes as an ordered byte stream per connection.
 * Implementations: {@code ib} (the native engine), {@code nio} (TCP
 * sockets). Connections are created on demand; a frame is written as one
 * unit, concurrently from many threads: copied in ({@link #send}) or
 * written in place ({@link #reserve}, {@link #publish}).
 */
public interface Transport extends AutoCloseable {
    /** Registers where node {@code id} listens. */
    void addNode(int id, String host, int port);

    /** This node's transport port (for others' node tables). */
    int localPort();

    /** Largest frame (header and payload) a single {@link #send} may carry. */
    int maxFrameSize();

    /** Whether a connection this node sends to {@code node} on is open (a send needs no connection set-up). */
    boolean isConnected(int node);

    /**
     * Sends {@code header} followed by {@code payload[offset, offset + length)} as
     * one frame, waiting while the connection is being set up and while its
     * ring or flow-control window is full, until {@code deadlineNanos}
     * ({@link System#nanoTime}): one deadline for all of it. A connection set-up
     * that outlasts it fails the call with a {@link NetworkException} saying so.
     */
    void send(int node, byte[] header, byte[] payload, int offset, int length, long deadlineNanos) throws NetworkException;

    /**
     * Reserves one frame of {@code length} bytes (header included, at most
     * {@link #maxFrameSize}) in the ring of the connection to {@code node},
     * waiting like {@link #send}, for the caller to write in place through
     * {@code record} (bytes 4 and up). The caller must then {@link #publish}
     * it exactly once, whatever happens — a frame it could not finish it turns
     * into one the receiver skips. A thread's frames go out in the order of its
     * {@code reserve} and {@code send} calls. On failure nothing is reserved.
     */
    void reserve(int node, int length, long deadlineNanos, RingRecord record) throws NetworkException;

    /**
     * {@link #reserve} without waiting and without connecting: false, with
     * nothing reserved, when that would mean waiting — no open connection to
     * {@code node} yet, its window or ring full, or its connection closing.
     * The caller then takes the waiting path ({@link #reserve}), which
     * connects and says what failed. The default always says false.
     */
    default boolean tryReserve(int node, int length, RingRecord record) {
        return false;
    }

    /** {@link #send} without waiting and without connecting: false (nothing sent) where {@link #tryReserve} is false. */
    default boolean trySend(int node, byte[] header, byte[] payload, int offset, int length) {
        return false;
    }

    /** Hands the frame written into {@code record} (see {@link #reserve}) to the connection; never blocks. */
    void publish(RingRecord record);

    /**
     * {@link #publish} for a frame somebody waits for (a request or a
     * response): the transport may write it out at once on this thread, if
     * its connection is idle, instead of handing it to its own thread (a
     * wake-up on the round trip's path). Never blocks. The default publishes.
     */
    default void publishAwaited(RingRecord record) {
        publish(record);
    }

    /**
     * Whether a refused {@link TransportListener#onBuffer} holds back only
     * that buffer's source (true: the transport stops reading it and offers
     * the buffer again later). False where refusing stops every source (a
     * shared receive queue): the core then keeps what a source sends beyond
     * its share instead of refusing it.
     */
    default boolean holdsBackOneSource() {
        return true;
    }

    /**
     * Receive buffers all sources share, where the transport has a pool of its
     * own (the core keeps one source from holding more than its share of
     * them); {@link Integer#MAX_VALUE} if not bounded here.
     */
    default int receiveBuffers() {
        return Integer.MAX_VALUE;
    }

    /**
     * The calling thread starts waiting for data (a response) and may run the
     * transport's receive work itself meanwhile ({@link #receiveOnCaller}),
     * sparing a hand-off to it; until {@link #endReceivingOnCaller}. The
     * listener's {@code onBuffer} may then come on this thread. False if this
     * transport does not (the default): then nothing to end.
     */
    default boolean beginReceivingOnCaller() {
        return false;
    }

    /**
     * One receive iteration on the calling thread, between {@link
     * #beginReceivingOnCaller} and {@link #endReceivingOnCaller}: the work it
     * did (0: nothing came), or below 0 when another thread receives now or
     * the transport closed.
     */
    default int receiveOnCaller() {
        return -1;
    }

    /** Ends a {@link #beginReceivingOnCaller} that returned true. */
    default void endReceivingOnCaller() {}

    /**
     * Called by the core once {@code buffer}'s bytes may be confirmed to their
     * sender (flow control): after the handlers of the messages that completed
     * in it returned (on a handler thread, or on the receiving thread), at
     * once after parsing when none did (a part of a large message, responses).
     * Any thread; never blocks. Bytes not confirmed when a connection fails
     * are what the sender reports as a possible loss.
     */
    void consumed(IncomingBuffer buffer);

    /**
     * The core found a protocol violation in what {@code connection} from
     * {@code node} delivered ({@link IncomingBuffer#connection}): closes that
     * connection if it is still open, nothing else (the core counts it).
     * Never blocks.
     */
    void closeConnection(int node, int connection, String reason);

    /** What the transport runs on (e.g. {@code rxe0}, {@code sim2}, {@code tcp}). */
    String name();

    /** Counters (connections, bytes, errors …) by name. */
    java.util.Map<String, Long> stats();

    /**
     * Closes; the peers see a failure for every open connection (what they
     * sent us and we did not confirm is a possible loss on their side).
     */
    @Override
    void close();

    /**
     * Closes after the core handled everything it consumed: the peers that
     * sent to us learn exactly how many of their bytes were handled beyond our
     * last confirmation, so only the rest counts as a possible loss for them.
     * Only call it when that is true ({@code close()} otherwise).
     */
    default void closeAfterHandlingEverythingConsumed() {
        close();
    }

    /**
     * Waits up to {@code timeoutMs} until what senders published on open
     * connections has left this node (written to the socket, pumped to the
     * receiver, or acknowledged by the remote adapter), as a close in order
     * does first; true if it did. A connection that fails meanwhile is not
     * waited for.
     */
    boolean awaitSent(long timeoutMs) throws InterruptedException;
}
