package io.ibdxnet.ib;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.transport.Confirmations;
import io.ibdxnet.transport.ConnectLocks;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IdleStrategy;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.NodeId;
import io.ibdxnet.transport.NodeInts;
import io.ibdxnet.transport.NodeRefs;
import io.ibdxnet.transport.OutgoingRingBuffer;
import io.ibdxnet.transport.RingConnection;
import io.ibdxnet.transport.RingRecord;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import io.ibdxnet.transport.WriteInterestManager;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The InfiniBand transport (paper §8): frames are serialized straight into
 * the connection's native send ring (the ORB with its front-posted pointer);
 * the write interest manager tells the native send thread which node has data
 * or flow-control confirmations; received buffers go to the messaging core
 * and back to the native pool once parsed. Flow control (paper §2.4): at
 * most {@code window} bytes unconfirmed per connection; the receiver confirms
 * in units of the sender's {@code window × threshold} (named in the native
 * connection exchange, {@link NativeEngine#peerFlowUnit}), carried in the
 * immediate data. The native threads' up-calls are {@link IbEngineThreads}.
 */
public final class IbTransport implements Transport {
    private static final java.util.logging.Logger LOG = java.util.logging.Logger.getLogger(IbTransport.class.getName());
    final NativeEngine engine;
    final TransportListener listener;
    final WriteInterestManager wim = new WriteInterestManager();
    final NodeRefs<Connection> connections = new NodeRefs<>();
    final Confirmations confirmations;
    /**
     * Per node: the connection its bytes last came on (receive thread writes).
     * A new one starts a new stream: confirmations restart, and bytes of the
     * old one the core consumes later are not confirmed on the new one.
     * Stored XOR {@link NextWorkPackage#CONNECTION_NONE}: an unwritten slot
     * reads as "no bytes from that node yet". Read through {@link #incomingConnection(int)}.
     */
    final NodeInts incomingConnection = new NodeInts();
    final ConnectLocks connectLocks = new ConnectLocks();
    private final long window;
    final int connectTimeoutMs;
    private final int maxFrame;
    volatile boolean closing;
    /** Threads between checking {@link #closing} and waking the native send thread (close waits them out). */
    private final java.util.concurrent.atomic.AtomicInteger wakers = new java.util.concurrent.atomic.AtomicInteger();
    /** Orderly closes that lost data: published but unposted, or lost in flight (reported as failures). */
    final java.util.concurrent.atomic.AtomicLong lostOnClose = new java.util.concurrent.atomic.AtomicLong();
    /** Connections whose peer shut down (NodeEvents.LEFT). */
    final java.util.concurrent.atomic.AtomicLong peerShutdowns = new java.util.concurrent.atomic.AtomicLong();
    /** Receive thread: gives a parsed buffer back to the engine's pool. */
    final IncomingBuffer.BufferReleaser releaser;
    /** Connections after their close: settled by the send thread, stranded records resent. */
    final IbRetirement retirement = new IbRetirement(this);
    /** The native threads' up-calls ({@link EngineCallbacks}), on this transport's connections. */
    private final IbEngineThreads threads = new IbEngineThreads(this);

    /** One connection's Java side. */
    final class Connection extends RingConnection {
        /** The native connection whose ring {@link #orb} covers. */
        final int connectionId;
        /** Set once, when the connection is closed and handed to the send thread to settle. */
        final java.util.concurrent.atomic.AtomicBoolean retiring = new java.util.concurrent.atomic.AtomicBoolean();
        /**
         * Being filled with a closed connection's stranded records before it
         * becomes the node's connection: if it closes meanwhile, what it holds
         * is resent in turn although it is not (yet) the node's connection.
         */
        volatile boolean installing;

        Connection(int node, OutgoingRingBuffer orb, int connectionId, FlowWindow flow) {
            super(node, orb, flow);
            this.connectionId = connectionId;
        }

        /**
         * New data for the send thread, which may be asleep. Inside the
         * writers window: {@link #close} waits the writers out before it
         * destroys the engine, so no guard of our own is needed here.
         */
        @Override
        protected void published(int length) {
            wim.pushData(node);
            engine.sendPublished(length);
        }
    }

    /** The connection {@code node}'s bytes last came on, or {@link NextWorkPackage#CONNECTION_NONE}. */
    int incomingConnection(int node) {
        return incomingConnection.get(node) ^ NextWorkPackage.CONNECTION_NONE;
    }

    /** Starts the native engine with {@code settings}' table ({@link IbSettings#engineTable}). */
    public IbTransport(IbSettings settings, TransportListener listener) throws IbException {
        this.confirmations = new Confirmations(settings.flowControlUnit);
        this.listener = listener;
        this.window = settings.flowControlWindow;
        this.connectTimeoutMs = settings.connectTimeoutMs;
        this.engine = NativeEngine.start(settings.engineTable(), threads);
        this.releaser = engine::returnBuffer;
        this.maxFrame = FlowWindow.largestFrame(engine.ringSize(), settings.flowControlWindow, settings.flowControlUnit);
    }

    @Override
    public void addNode(int id, String host, int port) {
        engine.addNode(id, host, port);
    }

    @Override
    public int localPort() {
        return engine.localPort();
    }

    @Override
    public int maxFrameSize() {
        return maxFrame;
    }

    @Override
    public boolean isConnected(int node) {
        if (node < 0 || node >= connections.length()) {
            return false;
        }
        Connection c = connections.get(node);
        try {
            return c != null && !c.orb.isClosed() && engine.connectionOpen(c.connectionId);
        } catch (EngineClosedException e) {
            return false;
        }
    }

    /** The native receive work on a thread waiting for a response (engine key {@code recv_from_caller}). */
    @Override
    public boolean beginReceivingOnCaller() {
        return engine.receiveBegin();
    }

    @Override
    public int receiveOnCaller() {
        return engine.receiveOnCaller();
    }

    @Override
    public void endReceivingOnCaller() {
        engine.receiveEnd();
    }

    /** The device the engine runs on (e.g. {@code rxe0}, {@code sim2}). */
    @Override
    public String name() {
        return engine.fabricName();
    }

    /** Native counters. */
    @Override
    public Map<String, Long> stats() {
        Map<String, Long> m = new java.util.LinkedHashMap<>(engine.stats());
        m.put("closes_with_unsent_data", lostOnClose.get());
        m.put("peer_shutdowns", peerShutdowns.get());
        m.put("bytes_resent_after_close", retirement.resent());
        m.put("unconfirmed_bytes", RingConnection.unconfirmed(connections));
        return m;
    }

    /**
     * The node's connection, connecting first if needed — within the caller's
     * deadline: the lock and the native connect get only the time left.
     */
    private Connection connection(int node, long deadlineNanos) throws NetworkException {
        Connection c = connections.get(node);
        if (c != null) {
            return c;
        }
        try {
            if (!connectLocks.lock(node, deadlineNanos)) {
                throw new NetworkException(FailureReason.TIMEOUT, "no connection to node " + node + " within the caller's deadline "
                        + "(another sender is setting it up)");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new NetworkException(FailureReason.INTERRUPTED, "interrupted while connecting to node " + node, e);
        }
        try {
            c = connections.get(node);
            if (c == null) {
                c = open(node, deadlineNanos);
                connections.set(node, c);
                retirement.retireIfClosed(c); // its close event may have come before it was ours to retire
                listener.onConnected(node);
            }
            return c;
        } catch (EngineClosedException e) {
            // close() destroyed the engine under this connect: the caller's send fails as "closed"
            throw new NetworkException(FailureReason.CLOSED, "no connection to node " + node + ": the transport is closed", e);
        } finally {
            connectLocks.unlock(node);
        }
    }

    /** Connects (under the node's connect lock) within {@code connectTimeoutMs} and wraps the native ring. */
    Connection open(int node) throws NetworkException {
        return open(node, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(connectTimeoutMs));
    }

    /**
     * Connects (under the node's connect lock) and wraps the native ring;
     * the native connect waits at most until {@code deadlineNanos} (at least
     * 1 ms, never more than {@code connectTimeoutMs}). The engine's job thread
     * goes on setting the connection up after a caller gave up: the next
     * caller finds it established.
     */
    Connection open(int node, long deadlineNanos) throws NetworkException {
        // Rounded up: a deadline of connectTimeoutMs from just now is not "cut short".
        long leftMs = Math.floorDiv(deadlineNanos - System.nanoTime() + 999_999, 1_000_000);
        int timeoutMs = (int) Math.max(1, Math.min(connectTimeoutMs, leftMs));
        try {
            NativeEngine.RingHandle ring = engine.connect(node, timeoutMs);
            return new Connection(node, new OutgoingRingBuffer(ring.ringAddress, engine.ringSize()), ring.connectionId,
                    new FlowWindow(window, confirmations.unit()));
        } catch (IbException e) {
            // Cut short for the caller and used up (the engine counts in whole milliseconds).
            if (timeoutMs < connectTimeoutMs && System.nanoTime() - deadlineNanos > -TimeUnit.MILLISECONDS.toNanos(2)) {
                throw new NetworkException(FailureReason.TIMEOUT, "no connection to node " + node + " within the caller's deadline ("
                        + timeoutMs + " ms left of it; the engine goes on connecting in the background): "
                        + e.getMessage(), e);
            }
            throw new NetworkException(e instanceof IbRefusedException ? FailureReason.REFUSED : FailureReason.UNREACHABLE,
                    "no connection to node " + node + ": " + e.getMessage(), e);
        } catch (EngineClosedException e) {
            throw new NetworkException(FailureReason.CLOSED, "no connection to node " + node + ": the transport is closed", e); // closed meanwhile
        }
    }

    @Override
    public void send(int node, byte[] header, byte[] payload, int offset, int length, long deadlineNanos) throws NetworkException {
        RingConnection.checkFrame(header, length, maxFrame);
        IdleStrategy wait = null;
        while (true) {
            Connection c = connection(node, deadlineNanos);
            if (c.write(header, payload, offset, length, deadlineNanos, !closing)) {
                return; // the connection told the send thread (published)
            }
            wait = awaitSuccessor(node, c, deadlineNanos, wait);
        }
    }

    @Override
    public void reserve(int node, int length, long deadlineNanos, RingRecord record) throws NetworkException {
        RingConnection.checkFrame(length, maxFrame);
        IdleStrategy wait = null;
        while (true) {
            Connection c = connection(node, deadlineNanos);
            if (c.reserve(length, deadlineNanos, !closing, record)) {
                return;
            }
            wait = awaitSuccessor(node, c, deadlineNanos, wait);
        }
    }

    @Override
    public boolean tryReserve(int node, int length, RingRecord record) {
        RingConnection.checkFrame(length, maxFrame);
        Connection c = connections.get(node);
        return c != null && !closing && c.tryReserve(length, record);
    }

    @Override
    public boolean trySend(int node, byte[] header, byte[] payload, int offset, int length) {
        RingConnection.checkFrame(header, length, maxFrame);
        Connection c = connections.get(node);
        return c != null && !closing && c.tryWrite(header, payload, offset, length); // published() tells the send thread
    }

    @Override
    public void publish(RingRecord record) {
        RingConnection c = record.connection();
        c.publish(record); // tells the send thread (published)
    }

    /**
     * {@code c} was closed in order before we wrote: the next connection takes
     * the frame (after what the closed one still held). Waits a moment
     * ({@link IdleStrategy#parkingOnly}, made on the first wait) while
     * {@code c} is still the node's.
     *
     * @return the wait's strategy, for the next call of the same send
     */
    private IdleStrategy awaitSuccessor(int node, Connection c, long deadlineNanos, IdleStrategy wait) throws NetworkException {
        if (connections.get(node) != c) {
            return wait;
        }
        if (System.nanoTime() - deadlineNanos > 0) {
            throw new NetworkException(FailureReason.TIMEOUT, "send to node " + node + " timed out waiting for its new connection");
        }
        IdleStrategy w = wait != null ? wait : IdleStrategy.parkingOnly();
        w.idle();
        return w;
    }

    /**
     * After new write interest: posted on this thread if the native send
     * thread is idle or asleep ({@link NativeEngine#sendPublished}). Never
     * once {@link #close} has waited out the wakers (the engine may be gone):
     * both sides write, then read the other's variable (Dekker).
     */
    void sendPublished() {
        wakers.incrementAndGet();
        try {
            if (!closing) {
                engine.sendPublished(0);
            }
        } finally {
            wakers.decrementAndGet();
        }
    }

    /** The engine's receive buffers (its pool behind the shared receive queue). */
    @Override
    public int receiveBuffers() {
        return (int) Math.min(Integer.MAX_VALUE, engine.receiveBuffers());
    }

    /** The incoming ring is shared by every source: a refused entry would stop them all. */
    @Override
    public boolean holdsBackOneSource() {
        return false;
    }

    @Override
    public void consumed(IncomingBuffer b) {
        // Never blocks (runs on a handler thread, the message creation coordinator, or inline on the receive thread).
        if (incomingConnection(b.source) == b.connection && confirmations.consumed(b.source, b.length)) {
            wim.pushFlowControl(b.source);
            sendPublished();
        }
    }

    @Override
    public void closeConnection(int node, int connection, String reason) {
        // Only that connection: a newer one to the node stays (the close is by node).
        try {
            if (!closing && engine.closeQueuePair(node, connection)) {
                LOG.fine(() -> "closed the connection to node " + node + ": " + reason);
            }
        } catch (EngineClosedException e) {
            // the engine closed meanwhile: so did the connection
        }
    }

    /** Acknowledged by the remote adapter: a send completion confirms its bytes here. */
    @Override
    public boolean awaitSent(long timeoutMs) throws InterruptedException {
        return RingConnection.awaitLeft(connections, OutgoingRingBuffer::isDrained, timeoutMs);
    }

    @Override
    public void close() {
        close(false);
    }

    @Override
    public void closeAfterHandlingEverythingConsumed() {
        close(true);
    }

    private void close(boolean tellHandled) {
        // The engine's shutdown reports disconnects; they must not call back into it.
        closing = true;
        // Not a back-off (no IdleStrategy): a bounded spin on work already under
        // way (a wake-up call, a copy into a ring), ending within microseconds.
        while (wakers.get() > 0) {
            Thread.onSpinWait(); // a wake-up of the send thread is finishing
        }
        // A resend writes into a native ring: it must end before the engine frees them.
        retirement.stopResending(connectTimeoutMs + 1_000L);
        for (int i = 0; i < connections.length(); i++) {
            Connection c = connections.get(i);
            if (c != null) {
                c.orb.close();
                while (c.writers.get() > 0) {
                    Thread.onSpinWait(); // a copy into the native ring is finishing
                }
            }
        }
        // The core handled everything it consumed: tell each sender exactly what
        // of its current connection we handled beyond our confirmations (our
        // Leave carries it), so it can tell handled from lost without guessing.
        for (int node = 0; tellHandled && node < incomingConnection.length(); node++) {
            int qpn = incomingConnection(node);
            if (qpn != NextWorkPackage.CONNECTION_NONE) {
                try {
                    engine.setHandledOnLeave(node, qpn, confirmations.residue(node));
                } catch (RuntimeException e) {
                    break; // the engine is gone already: the peers see a plain failure
                }
            }
        }
        engine.close();
    }
}
