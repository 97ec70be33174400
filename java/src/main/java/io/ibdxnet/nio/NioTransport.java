package io.ibdxnet.nio;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.transport.AuthKey;
import io.ibdxnet.transport.Confirmations;
import io.ibdxnet.transport.ConnectLocks;
import io.ibdxnet.transport.DirectBufferPool;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.OutgoingRingBuffer;
import io.ibdxnet.transport.RingConnection;
import io.ibdxnet.transport.RingRecord;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The Ethernet transport over Java NIO: one selector thread per node does
 * all socket work ({@link NioReactor}). Senders write frames into the
 * per-connection outgoing ring buffer (as with InfiniBand); the selector
 * thread writes everything published in one gathering write (many small
 * messages, one system call), reads into pooled direct buffers that go to
 * the core as they are ({@link NioRecordReader}), and returns flow-control
 * confirmations on the way back of each connection (wire format:
 * {@link NioWire}). Each node opens its own connection to a peer it sends
 * to, so two nodes starting to talk at once never race.
 *
 * <p>This class is the {@link Transport} senders and the core call; it
 * touches no socket itself.
 */
public final class NioTransport implements Transport {
    private final NioSettings settings;
    private final NioHandshake handshake;
    private final NioReactor reactor;
    private final DirectBufferPool pool;
    private final NioConnections conns;
    private final Map<Integer, InetSocketAddress> nodes = new ConcurrentHashMap<>();
    private final ConnectLocks connectLocks = new ConnectLocks();
    private final int maxFrame;
    /**
     * A sender writes its own request or response only if nothing was
     * written on its connection for this long: a stream of them goes through
     * the selector thread, which writes many in one system call.
     */
    static final long WRITE_NOW_GAP_NANOS = 10_000;

    public NioTransport(NioSettings settings, TransportListener listener) throws NetworkException {
        this.settings = settings;
        this.maxFrame = FlowWindow.largestFrame(settings.ringSize, settings.flowControlWindow,
                Confirmations.unit(settings.flowControlWindow, settings.flowControlThreshold));
        this.handshake = new NioHandshake(settings.nodeId, new SecureRandom().nextLong(),
                Confirmations.unit(settings.flowControlWindow, settings.flowControlThreshold), settings.authKey,
                settings.checkPeerAddress);
        this.pool = new DirectBufferPool(settings.bufferCount, settings.bufferSize, "the receive pool "
                + "(nioBufferCount × nioBufferSize = " + settings.bufferCount + " × " + settings.bufferSize + ")");
        this.reactor = new NioReactor(settings, listener, handshake, nodes, pool);
        this.conns = reactor.conns;
    }

    @Override
    public void addNode(int id, String host, int port) {
        InetSocketAddress a = new InetSocketAddress(host, port);
        if (a.isUnresolved()) {
            throw new IllegalArgumentException("node " + id + ": host '" + host + "' does not resolve");
        }
        handshake.addNode(id, host);
        nodes.put(id, a);
    }

    @Override
    public int localPort() {
        return reactor.localPort();
    }

    @Override
    public int maxFrameSize() {
        return maxFrame;
    }

    @Override
    public boolean isConnected(int node) {
        if (node < 0 || node >= conns.outgoing.length()) {
            return false;
        }
        NioChannel c = conns.outgoing.get(node);
        return c != null && c.state() == NioChannel.State.OPEN;
    }

    @Override
    public int receiveBuffers() {
        return settings.bufferCount;
    }

    @Override
    public String name() {
        return "tcp";
    }

    @Override
    public Map<String, Long> stats() {
        Map<String, Long> m = new LinkedHashMap<>();
        long open = 0;
        for (int i = 0; i < NioConnections.NODES; i++) {
            NioChannel c = conns.outgoing.get(i);
            if (c != null && c.state() == NioChannel.State.OPEN) {
                open++;
            }
        }
        m.put("connections", open);
        reactor.counters.putTraffic(m);
        m.put("rejected", handshake.refusedTotal() + reactor.admissionRefused());
        reactor.counters.putEndings(m);
        m.put("unconfirmed_bytes", RingConnection.unconfirmed(conns.outgoing));
        m.put("ring_bytes_resident", RingConnection.ringResident(conns.outgoing));
        pool.putStats(m);
        handshake.stats(m);
        reactor.admissionStats(m);
        return m;
    }

    // ---- senders (any thread) ----

    @Override
    public void send(int node, byte[] header, byte[] payload, int offset, int length, long deadlineNanos) throws NetworkException {
        RingConnection.checkFrame(header, length, maxFrame);
        while (true) {
            NioChannel c = connection(node, deadlineNanos);
            if (!c.write(header, payload, offset, length, deadlineNanos, reactor.isRunning())) {
                continue; // evicted before we wrote: the next connection takes the frame
            }
            used(c);
            handOff(node);
            return;
        }
    }

    @Override
    public void reserve(int node, int length, long deadlineNanos, RingRecord record) throws NetworkException {
        RingConnection.checkFrame(length, maxFrame);
        while (true) {
            NioChannel c = connection(node, deadlineNanos);
            if (c.reserve(length, deadlineNanos, reactor.isRunning(), record)) {
                used(c);
                return;
            }
            // evicted before we reserved: the next connection takes the frame
        }
    }

    @Override
    public boolean tryReserve(int node, int length, RingRecord record) {
        RingConnection.checkFrame(length, maxFrame);
        NioChannel c = conns.outgoing.get(node);
        if (c == null || c.state() != NioChannel.State.OPEN || !c.tryReserve(length, record)) {
            return false;
        }
        used(c);
        return true;
    }

    @Override
    public boolean trySend(int node, byte[] header, byte[] payload, int offset, int length) {
        RingConnection.checkFrame(header, length, maxFrame);
        NioChannel c = conns.outgoing.get(node);
        if (c == null || c.state() != NioChannel.State.OPEN || !c.tryWrite(header, payload, offset, length)) {
            return false;
        }
        used(c);
        handOff(node);
        return true;
    }

    @Override
    public void publish(RingRecord record) {
        RingConnection c = record.connection();
        c.publish(record);
        handOff(c.node);
    }

    /**
     * A request or response is in its connection's ring: the sender writes it
     * out itself if the selector thread has nothing to do and the connection
     * is idle (nobody writes on it, nobody wrote for
     * {@link #WRITE_NOW_GAP_NANOS}), saving the selector thread's wake-up on
     * the round trip's way; otherwise, and whatever it could not write, the
     * selector thread writes. Plain messages always go through the selector
     * thread, which batches a stream's frames into few writes (a sender that
     * is descheduled often would otherwise find its connection idle often,
     * and pay a system call each time). A busy selector thread costs the
     * check no clock read.
     */
    @Override
    public void publishAwaited(RingRecord record) {
        NioChannel c = (NioChannel) record.connection();
        c.publish(record);
        if (reactor.isIdle() && c.idleFor(WRITE_NOW_GAP_NANOS) && c.writeNow(reactor.counters.bytesSent)) {
            reactor.counters.writesBySender.incrementAndGet();
            return;
        }
        handOff(c.node);
    }

    /** The selector thread writes what {@code node}'s connection holds (woken if it blocks). */
    private void handOff(int node) {
        reactor.wim.pushData(node);
        reactor.wake();
    }

    /** For the least-recently-used eviction (a shared write at most once a millisecond). */
    private static void used(NioChannel c) {
        long now = System.nanoTime();
        if (now - c.lastUse > 1_000_000L) {
            c.lastUse = now;
        }
    }

    /** The open outgoing channel to {@code node}, connecting first if needed. */
    private NioChannel connection(int node, long deadlineNanos) throws NetworkException {
        NioChannel c = conns.outgoing.get(node);
        if (c == null) {
            if (!reactor.isRunning()) {
                throw new NetworkException(FailureReason.CLOSED, "transport closed");
            }
            InetSocketAddress address = nodes.get(node);
            if (address == null) {
                throw new NetworkException(FailureReason.UNREACHABLE, "node " + node + " is not in the node table");
            }
            lockUntil(node, deadlineNanos);
            try {
                c = conns.outgoing.get(node);
                if (c == null) {
                    c = newChannel(node);
                    conns.outgoing.set(node, c);
                    reactor.connect(c);
                }
            } finally {
                connectLocks.unlock(node);
            }
        }
        if (c.state() != NioChannel.State.OPEN) {
            try {
                c.established.get(Math.max(1, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (ExecutionException e) {
                // The cause is the NioException the connection ended with: its text names the reason.
                throw new NetworkException(connectFailure(e.getCause()), "no connection to node " + node + ": "
                        + e.getCause().getMessage(), e.getCause());
            } catch (TimeoutException e) {
                // Ours ends here; the attempt itself goes on (up to connectTimeoutMs) for the next caller.
                throw new NetworkException(FailureReason.TIMEOUT, "no connection to node " + node + " within the caller's deadline (still "
                        + "connecting in the background, up to connectTimeoutMs = " + settings.connectTimeoutMs + " ms)");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new NetworkException(FailureReason.INTERRUPTED, "interrupted while connecting to node " + node, e);
            }
        }
        return c;
    }

    /** The reason a caller gets for a connection attempt that ended with {@code cause}. */
    static FailureReason connectFailure(Throwable cause) {
        if (!(cause instanceof NioFailure.NioException)) {
            return FailureReason.UNREACHABLE;
        }
        switch (((NioFailure.NioException) cause).kind) {
            case HANDSHAKE:
                return FailureReason.REFUSED; // the peer refused our hello or key
            case SHUTDOWN:
                return FailureReason.CLOSED; // this node closes
            default:
                return FailureReason.UNREACHABLE; // refused or reset by the host, no answer within connectTimeoutMs, …
        }
    }

    /** The connect lock of {@code node}, or a failure once the caller's deadline passed first. */
    private void lockUntil(int node, long deadlineNanos) throws NetworkException {
        try {
            if (!connectLocks.lock(node, deadlineNanos)) {
                throw new NetworkException(FailureReason.TIMEOUT, "no connection to node " + node + " within the caller's deadline "
                        + "(another sender is setting it up)");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new NetworkException(FailureReason.INTERRUPTED, "interrupted while connecting to node " + node, e);
        }
    }

    private NioChannel newChannel(int node) throws NetworkException {
        SocketChannel socket;
        try {
            socket = SocketChannel.open();
            socket.configureBlocking(false);
            socket.setOption(StandardSocketOptions.TCP_NODELAY, true);
        } catch (IOException e) {
            throw new NetworkException(FailureReason.RESOURCES, "cannot open a socket: " + e.getMessage(), e);
        }
        NioChannel c;
        try {
            c = NioChannel.outgoing(node, socket, settings.ringSize,
                    new FlowWindow(settings.flowControlWindow, reactor.confirmations.unit()));
        } catch (IllegalStateException e) { // no memory for the ring (direct, mapped or a file)
            try {
                socket.close();
            } catch (IOException x) {
                e.addSuppressed(x);
            }
            throw new NetworkException(FailureReason.RESOURCES, e.getMessage(), e);
        }
        c.lastUse = System.nanoTime();
        c.deadline = c.lastUse + TimeUnit.MILLISECONDS.toNanos(settings.connectTimeoutMs);
        return c;
    }

    // ---- the core (any thread) ----

    @Override
    public void consumed(IncomingBuffer b) {
        if (conns.incomingId.get(b.source) == b.connection && reactor.confirmations.consumed(b.source, b.length)) {
            reactor.wim.pushFlowControl(b.source);
            reactor.wake();
        }
    }

    @Override
    public void closeConnection(int node, int connection, String reason) {
        reactor.drop(node, connection, reason);
    }

    /** Test hook: the selector thread sleeps {@code ms} at its next turn, as if this process were paused; returns once it does. */
    void pauseForTest(long ms) {
        reactor.pauseForTest(ms);
    }

    /** Written to the socket (the peer's flow-control confirmations come in units, so not those). */
    @Override
    public boolean awaitSent(long timeoutMs) throws InterruptedException {
        return RingConnection.awaitLeft(conns.outgoing, OutgoingRingBuffer::isAllPosted, timeoutMs);
    }

    @Override
    public void close() {
        reactor.stop();
    }

    @Override
    public void closeAfterHandlingEverythingConsumed() {
        conns.tellHandled = true;
        reactor.stop();
    }
}
