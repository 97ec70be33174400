package io.ibdxnet.loopback;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.transport.NodeId;
import io.ibdxnet.transport.NodeRefs;
import io.ibdxnet.transport.OutgoingRingBuffer;
import io.ibdxnet.transport.WriteInterestManager;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.transport.Confirmations;
import io.ibdxnet.transport.DirectBufferPool;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IdleStrategy;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.RingConnection;
import io.ibdxnet.transport.RingMemory;
import io.ibdxnet.transport.RingRecord;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Nodes in one JVM, connected through memory: the same outgoing ring
 * buffers, flow control and incoming buffers as the network transports, but
 * a pump thread copies ring data straight into the receiver's buffers. It
 * measures the messaging core without any network, and runs tests without
 * one. "Ports" are keys of a JVM-wide registry.
 */
public final class LoopbackTransport implements Transport {
    private static final Map<Integer, LoopbackTransport> REGISTRY = new ConcurrentHashMap<>();
    private static final AtomicInteger NEXT_PORT = new AtomicInteger(1);
    private static final AtomicInteger NEXT_CONNECTION = new AtomicInteger();
    private static final int NODES = NodeId.COUNT;
    /**
     * The idle pump's sleep after its {@link IdleStrategy#until} phase: a
     * sender's unpark ends it; the bound only limits what a missed unpark costs.
     */
    private static final long SLEEP_BOUND_NS = 50_000_000L;
    /** How often the idle pump looks for rings to give pages back ({@link OutgoingRingBuffer#releaseIfIdle}). */
    private static final long RELEASE_CHECK_NS = 100_000_000L;

    private final int nodeId;
    private final int port;
    private final long window;
    private final int ringSize;
    private final TransportListener listener;
    private final Confirmations confirmations;
    private final DirectBufferPool pool;
    private final int bufferCount;
    private final IncomingBuffer.BufferReleaser releaser;
    private final Map<Integer, Integer> nodes = new ConcurrentHashMap<>();
    private final NodeRefs<Connection> connections = new NodeRefs<>();
    private final WriteInterestManager wim = new WriteInterestManager();
    private final Thread pump;
    /** Pump only: when to look for idle rings next. */
    private long nextRelease;
    private final AtomicLong bytesSent = new AtomicLong();
    private volatile boolean running = true;
    private volatile boolean sleeping;

    /** Our side of the way to one other node. */
    private static final class Connection extends RingConnection {
        final LoopbackTransport peer;
        /** Unique in this JVM: the receiver's stream restarts when it changes. */
        final int id = NEXT_CONNECTION.incrementAndGet();
        /** Pump only: a view of the ring to copy from. */
        final ByteBuffer view;
        /** Pump only: a buffer the receiver refused, offered again first. */
        IncomingBuffer refused;
        /** Its receiver could not take everything: the pump retries it after a pause. */
        volatile boolean stalled;

        Connection(int node, LoopbackTransport peer, RingMemory ring, FlowWindow flow) {
            super(node, new OutgoingRingBuffer(ring), flow);
            this.peer = peer;
            this.view = ring.buffer.duplicate();
        }
    }

    public LoopbackTransport(int nodeId, int port, long window, double threshold, int ringSize, int bufferSize,
            int bufferCount, TransportListener listener) throws NetworkException {
        this.nodeId = nodeId;
        this.window = window;
        this.ringSize = ringSize;
        this.listener = listener;
        this.confirmations = new Confirmations(Confirmations.unit(window, threshold));
        this.pool = new DirectBufferPool(bufferCount, bufferSize, "the receive pool (nioBufferCount × nioBufferSize = "
                + bufferCount + " × " + bufferSize + ")");
        this.bufferCount = bufferCount;
        this.releaser = pool::release;
        int p = port;
        if (p == 0) {
            do {
                p = NEXT_PORT.getAndIncrement();
            } while (REGISTRY.putIfAbsent(p, this) != null);
        } else if (REGISTRY.putIfAbsent(p, this) != null) {
            throw new NetworkException(FailureReason.RESOURCES, "loopback port " + p + " is taken");
        }
        this.port = p;
        this.pump = new Thread(this::run, "dxnet-loopback-" + nodeId);
        pump.setDaemon(true);
        pump.start();
    }

    @Override
    public void addNode(int id, String host, int port) {
        nodes.put(id, port);
    }

    @Override
    public int localPort() {
        return port;
    }

    @Override
    public int maxFrameSize() {
        return FlowWindow.largestFrame(ringSize, window, confirmations.unit());
    }

    @Override
    public boolean isConnected(int node) {
        if (node < 0 || node >= connections.length()) {
            return false;
        }
        Connection c = connections.get(node);
        return c != null && !c.orb.isClosed();
    }

    @Override
    public int receiveBuffers() {
        return bufferCount;
    }

    @Override
    public String name() {
        return "loopback";
    }

    @Override
    public Map<String, Long> stats() {
        Map<String, Long> m = new LinkedHashMap<>();
        long open = 0;
        for (int i = 0; i < NODES; i++) {
            open += connections.get(i) != null ? 1 : 0;
        }
        m.put("connections", open);
        m.put("bytes_sent", bytesSent.get());
        m.put("unconfirmed_bytes", RingConnection.unconfirmed(connections));
        m.put("ring_bytes_resident", RingConnection.ringResident(connections));
        pool.putStats(m);
        return m;
    }

    @Override
    public void send(int node, byte[] header, byte[] payload, int offset, int length, long deadlineNanos) throws NetworkException {
        RingConnection.checkFrame(header, length, maxFrameSize());
        Connection c = connection(node);
        c.write(header, payload, offset, length, deadlineNanos, false);
        dataReady(c);
    }

    @Override
    public void reserve(int node, int length, long deadlineNanos, RingRecord record) throws NetworkException {
        RingConnection.checkFrame(length, maxFrameSize());
        connection(node).reserve(length, deadlineNanos, false, record);
    }

    @Override
    public boolean tryReserve(int node, int length, RingRecord record) {
        RingConnection.checkFrame(length, maxFrameSize());
        Connection c = connections.get(node);
        return c != null && c.tryReserve(length, record);
    }

    @Override
    public boolean trySend(int node, byte[] header, byte[] payload, int offset, int length) {
        RingConnection.checkFrame(header, length, maxFrameSize());
        Connection c = connections.get(node);
        if (c == null || !c.tryWrite(header, payload, offset, length)) {
            return false;
        }
        dataReady(c);
        return true;
    }

    @Override
    public void publish(RingRecord record) {
        RingConnection c = record.connection();
        c.publish(record);
        dataReady((Connection) c);
    }

    private void dataReady(Connection c) {
        if (c.stalled) {
            return; // the pump retries it after its pause anyway: no wake-up, no busy retry
        }
        wim.pushData(c.node);
        if (sleeping) {
            LockSupport.unpark(pump);
        }
    }

    private Connection connection(int node) throws NetworkException {
        Connection c = connections.get(node);
        if (c != null) {
            return c;
        }
        Integer port = nodes.get(node);
        if (port == null) {
            throw new NetworkException(FailureReason.UNREACHABLE, "node " + node + " is not in the node table");
        }
        LoopbackTransport peer = REGISTRY.get(port);
        if (peer == null || !peer.running || peer.nodeId != node) {
            throw new NetworkException(FailureReason.UNREACHABLE, "no node " + node + " at loopback port " + port);
        }
        RingMemory ring;
        try {
            ring = RingMemory.allocate(ringSize, "the ring of the connection to node " + node + " (nioRingSize = "
                    + ringSize + ")");
        } catch (IllegalStateException e) {
            throw new NetworkException(FailureReason.RESOURCES, e.getMessage(), e);
        }
        Connection fresh = new Connection(node, peer, ring, new FlowWindow(window, confirmations.unit()));
        if (!connections.compareAndSet(node, null, fresh)) {
            fresh.orb.close(); // never used: its file (a file ring's) closed now, not when collected
            return connections.get(node);
        }
        // Before its first byte: the peer confirms what we send in our unit (set-up, as the handshake does on nio).
        peer.confirmations.reset(nodeId, confirmations.unit());
        listener.onConnected(node);
        return fresh;
    }

    @Override
    public void consumed(IncomingBuffer b) {
        if (confirmations.consumed(b.source, b.length)) {
            int units = confirmations.take(b.source); // handler threads confirm at once: each unit taken once
            Integer port = nodes.get(b.source);
            LoopbackTransport sender = port == null ? null : REGISTRY.get(port);
            Connection c = sender == null ? null : sender.connections.get(nodeId);
            if (units > 0 && c != null && c.peer == this && c.id == b.connection) {
                c.flow.confirm(units);
            }
        }
    }

    @Override
    public void closeConnection(int node, int connection, String reason) {
        Integer port = nodes.get(node);
        LoopbackTransport sender = port == null ? null : REGISTRY.get(port);
        Connection c = sender == null ? null : sender.connections.get(nodeId);
        if (c != null && c.peer == this && c.id == connection) {
            sender.peerGone(c); // the sender's way to us fails, as a closed socket would
        }
    }

    // ---- pump thread ----

    private void run() {
        // Nodes whose receiver could not take everything: looked at again after a pause.
        // The pause grows while they stay refused (a held source may wait for seconds).
        java.util.List<Connection> stalled = new java.util.ArrayList<>();
        IdleStrategy stallWait = IdleStrategy.parkingOnly();
        long movedBefore = 0;
        while (running) {
            int node = wim.next();
            if (node >= 0) {
                Connection c = connections.get(node);
                if (c != null && !move(c) && !c.stalled) {
                    c.stalled = true;
                    stalled.add(c);
                }
                continue;
            }
            if (!stalled.isEmpty()) {
                if (bytesSent.get() != movedBefore) {
                    stallWait.reset(); // something got through: the rest may soon
                }
                movedBefore = bytesSent.get();
                sleeping = true; // a sender with new data ends the pause (as below)
                if (wim.isEmpty()) {
                    stallWait.idle();
                }
                sleeping = false;
                for (Connection c : stalled) {
                    c.stalled = false; // then pushed: new data meanwhile was not lost
                    wim.pushData(c.node);
                }
                stalled.clear();
                continue;
            }
            stallWait.reset();
            // Idle: yield for a moment (cheap to wake), then sleep (a sender unparks us).
            IdleStrategy.until(() -> !wim.isEmpty());
            if (wim.isEmpty()) { // about to sleep, not between two messages: rings idle long enough give pages back
                long now = System.nanoTime();
                if (now - nextRelease >= 0) {
                    releaseIdleRings(now);
                    nextRelease = now + RELEASE_CHECK_NS;
                }
            }
            // Senders write, then read `sleeping`; we write it, then read the
            // queue: one of us sees the other, so the long park loses nothing
            // (it only bounds how long a missed unpark could cost). Not a back-off:
            // the block after the strategy, ended by the sender's unpark.
            sleeping = true;
            if (wim.isEmpty()) {
                LockSupport.parkNanos(SLEEP_BOUND_NS);
            }
            sleeping = false;
        }
    }

    /** Gives back the pages of rings empty for a while (pump only: the rings' send thread). */
    private void releaseIdleRings(long now) {
        for (int i = 0; i < connections.length(); i++) {
            Connection c = connections.get(i);
            if (c != null) {
                c.orb.releaseIfIdle(now, OutgoingRingBuffer.RELEASE_AFTER_NANOS);
            }
        }
    }

    /** Copies what is published in {@code c}'s ring to the receiver; false if it could not take all. */
    private boolean move(Connection c) {
        LoopbackTransport to = c.peer;
        if (!to.running) {
            peerGone(c);
            return true;
        }
        if (c.refused != null) {
            if (!to.listener.onBuffer(c.refused)) {
                return false;
            }
            c.refused = null;
        }
        long ready;
        while ((ready = c.orb.postable()) > 0) { // up to the window's end: the copy wraps at the capacity
            int id = to.pool.take();
            if (id < 0) {
                return false;
            }
            ByteBuffer dst = to.pool.buffer(id);
            int n = (int) Math.min(ready, dst.capacity());
            int offset = c.orb.postOffset();
            int first = Math.min(n, ringSize - offset);
            ByteBuffer src = c.view;
            src.clear();
            src.limit(offset + first).position(offset);
            dst.clear();
            dst.put(src);
            if (first < n) {
                src.limit(n - first).position(0);
                dst.put(src);
            }
            c.orb.posted(n);
            c.orb.confirmed(n);
            bytesSent.addAndGet(n);
            IncomingBuffer b = new IncomingBuffer(nodeId, to.pool.address(id), n, c.id, id, to.releaser);
            if (!to.listener.onBuffer(b)) {
                c.refused = b;
                return false;
            }
        }
        return true;
    }

    private void peerGone(Connection c) {
        if (connections.compareAndSet(c.node, c, null)) {
            c.orb.close();
            listener.onDisconnected(c.node);
        }
    }

    /** {@code peer} closed: fail our way to it. */
    private void peerClosed(LoopbackTransport peer) {
        Connection c = connections.get(peer.nodeId);
        if (c != null && c.peer == peer) {
            peerGone(c);
        }
    }

    /** Pumped into the receiver's buffers (confirmed as it is pumped). */
    @Override
    public boolean awaitSent(long timeoutMs) throws InterruptedException {
        return RingConnection.awaitLeft(connections, OutgoingRingBuffer::isDrained, timeoutMs);
    }

    @Override
    public void close() {
        if (!running) {
            return;
        }
        running = false;
        REGISTRY.remove(port, this);
        LockSupport.unpark(pump);
        try {
            pump.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (int i = 0; i < NODES; i++) {
            Connection c = connections.getAndSet(i, null);
            if (c != null) {
                c.orb.close();
                if (c.refused != null) {
                    c.refused.release();
                }
            }
        }
        for (LoopbackTransport t : REGISTRY.values()) {
            t.peerClosed(this);
        }
    }
}
