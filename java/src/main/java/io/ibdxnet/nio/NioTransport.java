package io.ibdxnet.nio;

import io.ibdxnet.NetworkException;
import io.ibdxnet.transport.NodeId;
import io.ibdxnet.transport.WriteInterestManager;
import io.ibdxnet.transport.Confirmations;
import io.ibdxnet.transport.DirectBufferPool;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.RingConnection;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The Ethernet transport over Java NIO: one selector thread per node does
 * all socket work. Senders write frames into the per-connection outgoing
 * ring buffer (as with InfiniBand); the selector thread writes everything
 * published in one gathering write (many small messages, one system call),
 * reads into pooled direct buffers that go to the core as they are, and
 * returns flow-control confirmations on the way back of each connection
 * (wire format: {@link NioWire}). Each node opens its own connection to a
 * peer it sends to, so two nodes starting to talk at once never race.
 */
public final class NioTransport implements Transport {
    private static final Logger LOG = Logger.getLogger(NioTransport.class.getName());
    private final io.ibdxnet.core.RateLimitedLog failureLog = new io.ibdxnet.core.RateLimitedLog(LOG, 1_000);
    private static final int NODES = NodeId.COUNT;
    private static final long HOUSEKEEPING_NANOS = 50_000_000L;
    private static final long IDLE_POLL_NANOS = 50_000;
    /** Incoming connections in their handshake at most; more are closed at once (each holds a socket until its timeout). */
    static final int MAX_PENDING_HANDSHAKES = 128;

    /** Settings of one transport instance. */
    public static final class Settings {
        public int nodeId;
        public String listenHost = "0.0.0.0";
        public int listenPort;
        public long flowControlWindow = 16L << 20;
        public double flowControlThreshold = 0.1;
        public int connectTimeoutMs = 10_000;
        public int maxConnections = 100;
        public int bufferSize = 64 << 10;
        public int bufferCount = 512;
        public int ringSize = 4 << 20;
        public int keepAliveMs = 1_000;
        public int idleTimeoutMs = 10_000;
        /** Accept a hello only from an address the node table gives for the claimed node. */
        public boolean checkPeerAddress = true;
        /** The pre-shared key, or null: with one, connections start with a mutual challenge–response. */
        public io.ibdxnet.transport.AuthKey authKey;
    }

    private final Settings settings;
    private final TransportListener listener;
    private final long instance = new SecureRandom().nextLong();
    private final NioHandshake handshake;
    private final Selector selector;
    private final ServerSocketChannel server;
    private final Thread thread;
    private final DirectBufferPool pool;
    private final IncomingBuffer.BufferReleaser releaser;
    private final Confirmations confirmations;
    private final WriteInterestManager wim = new WriteInterestManager();
    private final Map<Integer, InetSocketAddress> nodes = new ConcurrentHashMap<>();
    private final AtomicReferenceArray<NioChannel> outgoing = new AtomicReferenceArray<>(NODES);
    /** The current incoming channel's id per node (consumed bytes of older ones are not confirmed). */
    private final AtomicIntegerArray incomingId = new AtomicIntegerArray(NODES);
    private final Object[] connectLocks = new Object[64];
    private final ConcurrentLinkedQueue<NioChannel> toConnect = new ConcurrentLinkedQueue<>();
    /** Incoming connections the core found in violation of the protocol: {node, channel id, reason}. */
    private final ConcurrentLinkedQueue<Object[]> toDrop = new ConcurrentLinkedQueue<>();
    private final int maxFrame;
    private volatile boolean running = true;
    private volatile boolean sleeping;
    /** {@link #pauseForTest}. */
    private volatile long pauseMs;

    // Selector thread only.
    private final Map<Integer, NioChannel> incoming = new HashMap<>();
    /** Connects waiting for the previous connection to the node to finish closing. */
    private final List<NioChannel> deferred = new ArrayList<>();
    /** Per node: {instance, id} of the last incoming connection that ended with a goodbye. */
    private final Map<Integer, long[]> goodbyes = new HashMap<>();
    private final List<NioChannel> channels = new ArrayList<>();
    private int nextId = 1;
    private long nextHousekeeping;

    private final AtomicLong bytesSent = new AtomicLong();
    private final AtomicLong bytesReceived = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    /** Connections whose peer shut down on purpose (LEAVING / FINAL), not counted as failures. */
    private final AtomicLong peerShutdowns = new AtomicLong();
    private final AtomicLong evictions = new AtomicLong();
    private final AtomicLong keepAlives = new AtomicLong();

    public NioTransport(Settings settings, TransportListener listener) throws NetworkException {
        this.settings = settings;
        this.listener = listener;
        this.confirmations = new Confirmations(Confirmations.unit(settings.flowControlWindow, settings.flowControlThreshold));
        this.maxFrame = (int) Math.min(settings.ringSize / 2, settings.flowControlWindow);
        this.handshake = new NioHandshake(settings.nodeId, instance, settings.authKey, settings.checkPeerAddress);
        this.pool = new DirectBufferPool(settings.bufferCount, settings.bufferSize);
        this.releaser = pool::release;
        for (int i = 0; i < connectLocks.length; i++) {
            connectLocks[i] = new Object();
        }
        InetSocketAddress listen = new InetSocketAddress(settings.listenHost, settings.listenPort);
        if (listen.isUnresolved()) {
            throw new IllegalArgumentException("listen host '" + settings.listenHost + "' does not resolve");
        }
        try {
            this.selector = Selector.open();
        } catch (IOException e) {
            throw new NetworkException("cannot open a selector: " + e.getMessage(), e);
        }
        try {
            this.server = ServerSocketChannel.open();
            server.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            server.bind(listen, 128);
            server.configureBlocking(false);
            server.register(selector, SelectionKey.OP_ACCEPT);
        } catch (IOException e) {
            closeQuietly(selector);
            throw new NetworkException("cannot listen on " + settings.listenHost + ":" + settings.listenPort + ": " + e.getMessage(), e);
        }
        this.thread = new Thread(this::run, "dxnet-nio-" + settings.nodeId);
        thread.setDaemon(true);
        thread.start();
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
        return server.socket().getLocalPort();
    }

    @Override
    public int maxFrameSize() {
        return maxFrame;
    }

    @Override
    public String name() {
        return "tcp";
    }

    @Override
    public Map<String, Long> stats() {
        Map<String, Long> m = new LinkedHashMap<>();
        long open = 0;
        for (int i = 0; i < NODES; i++) {
            NioChannel c = outgoing.get(i);
            if (c != null && c.state == NioChannel.State.OPEN) {
                open++;
            }
        }
        m.put("connections", open);
        m.put("bytes_sent", bytesSent.get());
        m.put("bytes_received", bytesReceived.get());
        m.put("rejected", handshake.refusedTotal());
        m.put("failures", failures.get());
        m.put("peer_shutdowns", peerShutdowns.get());
        m.put("evictions", evictions.get());
        m.put("keep_alives", keepAlives.get());
        m.put("unconfirmed_bytes", RingConnection.unconfirmed(outgoing));
        handshake.stats(m);
        return m;
    }

    // ---- senders (any thread) ----

    @Override
    public void send(int node, byte[] header, byte[] payload, int offset, int length, long deadlineNanos) throws NetworkException {
        RingConnection.checkFrame(header, length, maxFrame);
        while (true) {
            NioChannel c = connection(node, deadlineNanos);
            if (!c.write(header, payload, offset, length, deadlineNanos, running)) {
                continue; // evicted before we wrote: the next connection takes the frame
            }
            long now = System.nanoTime();
            if (now - c.lastUse > 1_000_000L) {
                c.lastUse = now;
            }
            wim.pushData(node);
            wake();
            return;
        }
    }

    private void wake() {
        if (sleeping) {
            selector.wakeup();
        }
    }

    /** The open outgoing channel to {@code node}, connecting first if needed. */
    private NioChannel connection(int node, long deadlineNanos) throws NetworkException {
        NioChannel c = outgoing.get(node);
        if (c == null) {
            if (!running) {
                throw new NetworkException("transport closed");
            }
            InetSocketAddress address = nodes.get(node);
            if (address == null) {
                throw new NetworkException("node " + node + " is not in the node table");
            }
            synchronized (connectLocks[node & (connectLocks.length - 1)]) {
                c = outgoing.get(node);
                if (c == null) {
                    SocketChannel socket;
                    try {
                        socket = SocketChannel.open();
                        socket.configureBlocking(false);
                        socket.setOption(StandardSocketOptions.TCP_NODELAY, true);
                    } catch (IOException e) {
                        throw new NetworkException("cannot open a socket: " + e.getMessage(), e);
                    }
                    c = NioChannel.outgoing(0, node, socket, settings.ringSize,
                            new FlowWindow(settings.flowControlWindow, confirmations.unit()));
                    c.lastUse = System.nanoTime();
                    c.deadline = c.lastUse + TimeUnit.MILLISECONDS.toNanos(settings.connectTimeoutMs);
                    outgoing.set(node, c);
                    toConnect.add(c);
                    selector.wakeup();
                }
            }
        }
        if (c.state != NioChannel.State.OPEN) {
            try {
                c.established.get(Math.max(1, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (ExecutionException e) {
                throw new NetworkException("no connection to node " + node + ": " + e.getCause().getMessage(), e.getCause());
            } catch (TimeoutException e) {
                throw new NetworkException("no connection to node " + node + " in time");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new NetworkException("interrupted while connecting to node " + node, e);
            }
        }
        return c;
    }

    @Override
    public void consumed(IncomingBuffer b) {
        if (incomingId.get(b.source) == b.connection && confirmations.consumed(b.source, b.length)) {
            wim.pushFlowControl(b.source);
            wake();
        }
    }

    // ---- selector thread ----

    private void run() {
        try {
            while (running) {
                if (pauseMs > 0) {
                    long end = System.nanoTime() + pauseMs * 1_000_000L;
                    pauseMs = 0;
                    while (System.nanoTime() - end < 0) {
                        java.util.concurrent.locks.LockSupport.parkNanos(end - System.nanoTime());
                    }
                }
                startConnects();
                dropViolators();
                serveWriteInterests();
                long now = System.nanoTime();
                boolean stalled = retryStalled(now);
                if (now - nextHousekeeping >= 0) {
                    housekeeping(now);
                    nextHousekeeping = now + HOUSEKEEPING_NANOS;
                }
                // Idle: poll without blocking for a moment (cheap to wake), then block
                // in select (a sender's wakeup costs a system call).
                int ready = selector.selectNow();
                long idle = System.nanoTime();
                while (ready == 0 && !stalled && toConnect.isEmpty() && wim.isEmpty() && System.nanoTime() - idle < IDLE_POLL_NANOS) {
                    Thread.yield();
                    ready = selector.selectNow();
                }
                if (ready == 0) {
                    sleeping = true;
                    if (toConnect.isEmpty() && wim.isEmpty()) {
                        selector.select(stalled ? 1 : HOUSEKEEPING_NANOS / 1_000_000);
                    }
                    sleeping = false;
                }
                Iterator<SelectionKey> it = selector.selectedKeys().iterator();
                while (it.hasNext()) {
                    SelectionKey k = it.next();
                    it.remove();
                    handle(k);
                }
            }
        } catch (IOException | RuntimeException e) {
            LOG.log(Level.SEVERE, "node " + settings.nodeId + ": NIO selector thread failed", e);
        } finally {
            shutdownChannels();
        }
    }

    private void handle(SelectionKey k) {
        if (!k.isValid()) {
            return;
        }
        if (k.attachment() == null) {
            accept();
            return;
        }
        NioChannel c = (NioChannel) k.attachment();
        long now = System.nanoTime();
        try {
            if (k.isConnectable()) {
                finishConnect(c, now);
            }
            if (k.isValid() && k.isReadable()) {
                read(c, now);
            }
            if (k.isValid() && k.isWritable()) {
                flush(c, now);
            }
        } catch (IOException e) {
            fail(c, e.getMessage() == null ? e.toString() : e.getMessage());
        } catch (ProtocolException e) {
            fail(c, "protocol error: " + e.getMessage());
        } catch (java.nio.channels.CancelledKeyException e) {
            close(c, "connection closed"); // closed while its events were handled
        }
    }

    private void accept() {
        SocketChannel s;
        try {
            s = server.accept();
            if (s == null) {
                return;
            }
            s.configureBlocking(false);
            s.setOption(StandardSocketOptions.TCP_NODELAY, true);
        } catch (IOException e) {
            LOG.log(Level.WARNING, "node " + settings.nodeId + ": accept failed", e);
            return;
        }
        if (pendingHandshakes() >= MAX_PENDING_HANDSHAKES) {
            handshake.count("busy");
            closeQuietly(s);
            return;
        }
        NioChannel c = NioChannel.incoming(nextId++, s);
        try {
            c.remoteAddress = ((InetSocketAddress) s.getRemoteAddress()).getAddress();
        } catch (IOException | RuntimeException e) {
            closeQuietly(s);
            return;
        }
        long now = System.nanoTime();
        c.lastRead = now;
        c.lastWrite = now;
        c.deadline = now + TimeUnit.MILLISECONDS.toNanos(settings.connectTimeoutMs);
        handshake.accepted(c);
        try {
            c.key = s.register(selector, SelectionKey.OP_READ, c);
        } catch (IOException e) {
            closeQuietly(s);
            return;
        }
        channels.add(c);
    }

    private int pendingHandshakes() {
        int n = 0;
        for (NioChannel c : channels) {
            if (!c.outgoing && c.state == NioChannel.State.HANDSHAKE) {
                n++;
            }
        }
        return n;
    }

    @Override
    public void closeConnection(int node, int connection, String reason) {
        toDrop.add(new Object[] {node, connection, reason});
        selector.wakeup();
    }

    /** Selector thread: closes the incoming connections {@link #closeConnection} named, if still open. */
    private void dropViolators() {
        Object[] d;
        while ((d = toDrop.poll()) != null) {
            NioChannel c = incoming.get((Integer) d[0]);
            if (c != null && c.id == (Integer) d[1]) {
                fail(c, (String) d[2]);
            }
        }
    }

    private void startConnects() {
        for (int i = deferred.size() - 1; i >= 0; i--) {
            NioChannel c = deferred.get(i);
            if (closingTo(c.peer) == null) {
                deferred.remove(i);
                toConnect.add(c);
            }
        }
        NioChannel c;
        while ((c = toConnect.poll()) != null) {
            if (closingTo(c.peer) != null) {
                // The peer must read the old stream to its goodbye before the new one starts.
                deferred.add(c);
                continue;
            }
            evictIfNeeded(c.peer);
            channels.add(c);
            long now = System.nanoTime();
            c.lastRead = now;
            c.lastWrite = now;
            try {
                c.key = c.socket.register(selector, SelectionKey.OP_CONNECT, c);
                if (c.socket.connect(nodes.get(c.peer))) {
                    finishConnect(c, now);
                }
            } catch (IOException | RuntimeException e) {
                fail(c, describe(e));
            }
        }
    }

    /** An outgoing channel to {@code node} that is being closed on purpose, or null. */
    private NioChannel closingTo(int node) {
        for (NioChannel c : channels) {
            if (c.outgoing && c.peer == node && c.state == NioChannel.State.CLOSING) {
                return c;
            }
        }
        return null;
    }

    private static String describe(Exception e) {
        return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    }

    private void finishConnect(NioChannel c, long now) throws IOException {
        if (!c.socket.finishConnect()) {
            return;
        }
        c.state = NioChannel.State.HANDSHAKE;
        handshake.start(c);
        c.key.interestOps(SelectionKey.OP_READ);
        flush(c, now);
    }

    /** Evicts the least recently used idle outgoing channel if a new one would exceed the limit. */
    private void evictIfNeeded(int newNode) {
        int open = 0;
        NioChannel lru = null;
        for (NioChannel c : channels) {
            if (!c.outgoing || c.state == NioChannel.State.CLOSED || c.orderly) {
                continue;
            }
            open++;
            if (c.peer != newNode && c.state == NioChannel.State.OPEN && c.orb.isDrained() && c.writers.get() == 0
                    && (lru == null || c.lastUse - lru.lastUse < 0)) {
                lru = c;
            }
        }
        if (open >= settings.maxConnections && lru != null) {
            evictions.incrementAndGet();
            lru.orderly = true;
            lru.orb.close(); // senders that race with this retry on a new connection
            outgoing.compareAndSet(lru.peer, lru, null);
            lru.state = NioChannel.State.CLOSING; // flushes what was published, then says goodbye
        }
    }

    private final int[] counts = new int[2];

    private void serveWriteInterests() {
        int node;
        long now = System.nanoTime();
        while ((node = wim.next(counts)) >= 0) {
            NioChannel out = outgoing.get(node);
            if (out != null && out.state == NioChannel.State.OPEN) {
                flush(out, now);
            }
            NioChannel in = incoming.get(node);
            if (in != null && in.state == NioChannel.State.OPEN) {
                int units = confirmations.owed(node, NioWire.MAX_UNITS);
                if (units > 0 && in.control.remaining() >= 4) {
                    in.control.putInt(NioWire.confirmation(units));
                    confirmations.sent(node, units);
                }
                flush(in, now);
            }
        }
    }

    private void flush(NioChannel c, long now) {
        try {
            bytesSent.addAndGet(c.flush(now));
            if (c.state == NioChannel.State.CLOSED || !c.key.isValid()) {
                return;
            }
            boolean done = c.fullyWritten();
            int ops = c.key.interestOps();
            int want = done ? ops & ~SelectionKey.OP_WRITE : ops | SelectionKey.OP_WRITE;
            if (want != ops) {
                c.key.interestOps(want);
            }
            if (done && c.state == NioChannel.State.CLOSING && c.writers.get() == 0) {
                finishGracefulClose(c, now);
            }
        } catch (IOException e) {
            fail(c, describe(e));
        }
    }

    /** Everything was written: say goodbye; the peer closes when it read it (then we do). */
    private void finishGracefulClose(NioChannel c, long now) throws IOException {
        if (!c.goodbyeSent && c.control.remaining() >= 4) {
            c.goodbyeSent = true;
            c.control.putInt(NioWire.GOODBYE);
            c.flush(now);
        }
    }

    private void read(NioChannel c, long now) throws IOException, ProtocolException {
        while (c.state == NioChannel.State.HANDSHAKE) {
            if (!readFully(c, now)) {
                return;
            }
            switch (c.outgoing ? handshake.onConnectorRead(c, now) : handshake.onAcceptorRead(c)) {
                case CONTINUE:
                    flush(c, now);
                    break;
                case OPEN:
                    opened(c, now);
                    break;
                case ACCEPT:
                    if (!acceptPeer(c, now)) {
                        return;
                    }
                    break;
                case REFUSED:
                    flushRefusal(c, now);
                    return;
                default:
                    close(c);
                    return;
            }
        }
        if (c.outgoing) {
            readControl(c, now);
        } else {
            readData(c, now);
        }
    }

    /** Reads into {@code small} up to its limit; true when full. */
    private boolean readFully(NioChannel c, long now) throws IOException {
        int n = c.socket.read(c.small);
        if (n < 0) {
            throw new IOException(c.outgoing ? "the peer closed the connection during the handshake" : "end of stream");
        }
        c.lastRead = now;
        return !c.small.hasRemaining();
    }

    /**
     * Incoming: the hello (and proof) passed, the peer's stream starts. A
     * connection it still has here is stale: the peer opens a new one only
     * after its old one ended (an orderly close, or a failure it saw first —
     * a half-open connection), so the new one replaces it.
     */
    private boolean acceptPeer(NioChannel c, long now) throws IOException {
        int source = c.handshake.source;
        long peerInstance = c.handshake.peerInstance;
        NioChannel old = incoming.get(source);
        handshake.accept(c);
        if (old != null) {
            fail(old, old.instance == peerInstance ? "node " + source + " connected again (its old connection is stale)"
                    : "node " + source + " connected again (restarted)");
        }
        c.peer = source;
        c.instance = peerInstance;
        c.state = NioChannel.State.OPEN;
        c.small.clear();
        long[] last = goodbyes.remove(source);
        if (last != null && last[0] == peerInstance) {
            c.id = (int) last[1]; // the same stream, continued after an eviction
        }
        // The sender starts a fresh window (bytes of the old connection still being
        // processed may credit it once more: at most one window extra, once).
        confirmations.reset(source);
        incoming.put(source, c);
        incomingId.set(source, c.id);
        flush(c, now);
        return true;
    }

    /** Sends a refusal as far as the socket takes it and closes (the refusal is counted already). */
    private void flushRefusal(NioChannel c, long now) {
        try {
            c.flush(now);
        } catch (IOException e) {
            // the peer is gone already
        }
        close(c);
    }

    /** Outgoing: the peer accepted us; frames written while connecting go out. */
    private void opened(NioChannel c, long now) {
        c.handshake = null;
        c.small.clear();
        c.state = NioChannel.State.OPEN;
        c.established.complete(null);
        flush(c, now);
    }

    static String remote(NioChannel c) {
        try {
            return String.valueOf(c.socket.getRemoteAddress());
        } catch (IOException e) {
            return "?";
        }
    }

    /** The way back of an outgoing channel: control words only. */
    private void readControl(NioChannel c, long now) throws IOException, ProtocolException {
        int n = c.socket.read(c.small);
        if (n < 0) {
            if (c.goodbyeSent) {
                close(c); // the peer read our goodbye
                return;
            }
            throw new IOException("node " + c.peer + " closed the connection");
        }
        if (n == 0) {
            return;
        }
        c.lastRead = now;
        ByteBuffer b = c.small;
        b.flip();
        while (b.remaining() >= 4) {
            control(c, b.getInt());
        }
        b.compact();
    }

    private void control(NioChannel c, int word) throws ProtocolException {
        if (c.finalWords > 0) {
            c.finalBytes = c.finalBytes << 32 | (word & 0xFFFFFFFFL);
            if (--c.finalWords == 0 && !c.flow.confirmFinal(c.finalBytes)) {
                throw new ProtocolException("node " + c.peer + " confirms " + c.finalBytes + " bytes, more than "
                        + c.flow.unconfirmed() + " sent and unconfirmed");
            }
            return;
        }
        if (c.peerLeaving) {
            throw new ProtocolException("control word after node " + c.peer + " said it shuts down");
        }
        if (word == NioWire.FINAL || word == NioWire.LEAVING) {
            if ((word == NioWire.FINAL) != (c.flow != null)) {
                throw new ProtocolException("shutdown word for the other direction from node " + c.peer);
            }
            c.peerLeaving = true;
            c.finalWords = word == NioWire.FINAL ? 2 : 0;
            return;
        }
        if (word >= 0) {
            throw new ProtocolException("a data record where only control words may come (node " + c.peer + ")");
        }
        if (word == NioWire.GOODBYE) {
            c.orderly = true;
            return;
        }
        int units = word & 0x7FFFFFFF;
        if (units > 0) {
            if (c.flow == null) {
                throw new ProtocolException("flow-control confirmation from the sending side (node " + c.peer + ")");
            }
            c.flow.confirm(units);
        } else {
            keepAlives.incrementAndGet();
        }
    }

    /** Frames from the peer: read into pooled buffers and hand them to the core. */
    private void readData(NioChannel c, long now) throws IOException, ProtocolException {
        if (c.refused != null) {
            if (!listener.onBuffer(c.refused)) {
                stall(c);
                return;
            }
            c.refused = null;
            if (c.orderly) {
                goodbyes.put(c.peer, new long[] {c.instance, c.id});
                close(c);
                return;
            }
        }
        for (int round = 0; round < 4; round++) {
            int id = pool.take();
            if (id < 0) {
                stall(c);
                return;
            }
            ByteBuffer bb = pool.buffer(id);
            bb.clear();
            bb.put(c.held, 0, c.heldCount);
            int n;
            try {
                n = c.socket.read(bb);
            } catch (IOException e) {
                pool.release(id);
                throw e;
            }
            if (n <= 0) {
                pool.release(id);
                if (n < 0) {
                    if (c.orderly) {
                        close(c);
                        return;
                    }
                    throw new IOException("node " + c.peer + " closed the connection");
                }
                return;
            }
            c.lastRead = now;
            bytesReceived.addAndGet(n);
            c.heldCount = 0;
            int length;
            try {
                length = records(c, bb, bb.position());
            } catch (ProtocolException e) {
                pool.release(id);
                throw e;
            }
            if (length == 0) {
                pool.release(id);
            } else {
                IncomingBuffer b = new IncomingBuffer(c.peer, pool.address(id), length, c.id, id, releaser);
                if (!listener.onBuffer(b)) {
                    c.refused = b;
                    stall(c);
                    return;
                }
            }
            if (c.orderly) {
                // The sender's goodbye: its stream continues on its next connection.
                goodbyes.put(c.peer, new long[] {c.instance, c.id});
                close(c);
                return;
            }
            if (bb.position() < bb.capacity()) {
                return; // the socket had no more
            }
        }
    }

    /**
     * Walks the records in {@code b[0, length)}: data records stay, control
     * words are handled and cut out, a word split at the end is held back for
     * the next read. Returns the bytes of data left in the buffer.
     */
    private int records(NioChannel c, ByteBuffer b, int length) throws ProtocolException {
        int pos = 0;
        while (pos < length) {
            if (c.recordLeft > 0) {
                int k = Math.min(c.recordLeft, length - pos);
                pos += k;
                c.recordLeft -= k;
                continue;
            }
            if (length - pos < 4) {
                c.heldCount = length - pos;
                for (int i = 0; i < c.heldCount; i++) {
                    c.held[i] = b.get(pos + i);
                }
                return pos;
            }
            int word = b.getInt(pos);
            if (word < 0) {
                control(c, word);
                for (int i = pos + 4; i < length; i++) {
                    b.put(i - 4, b.get(i)); // forward copy: safe although the ranges overlap
                }
                length -= 4;
                continue;
            }
            if (word < 4 || word > NioWire.MAX_RECORD) {
                throw new ProtocolException("record of " + word + " bytes from node " + c.peer);
            }
            c.recordLeft = (word + 3) & -4;
        }
        return length;
    }

    private void stall(NioChannel c) {
        if (!c.stalled) {
            c.stalled = true;
            c.key.interestOps(c.key.interestOps() & ~SelectionKey.OP_READ);
        }
    }

    /** Resumes reading on stalled channels once buffers are free again. True if some stay stalled. */
    private boolean retryStalled(long now) {
        boolean any = false;
        for (int i = 0; i < channels.size(); i++) {
            NioChannel c = channels.get(i);
            if (!c.stalled || c.state == NioChannel.State.CLOSED) {
                continue;
            }
            c.stalled = false;
            c.key.interestOps(c.key.interestOps() | SelectionKey.OP_READ);
            try {
                readData(c, now);
            } catch (IOException e) {
                fail(c, describe(e));
            } catch (ProtocolException e) {
                fail(c, "protocol error: " + e.getMessage());
            }
            any |= c.stalled;
        }
        return any;
    }

    private void housekeeping(long now) {
        long keepAlive = TimeUnit.MILLISECONDS.toNanos(settings.keepAliveMs);
        long idle = TimeUnit.MILLISECONDS.toNanos(settings.idleTimeoutMs);
        for (int i = channels.size() - 1; i >= 0; i--) {
            NioChannel c = channels.get(i);
            switch (c.state) {
                case CLOSED:
                    channels.remove(i);
                    break;
                case CONNECTING:
                case HANDSHAKE:
                    if (now - c.deadline > 0 && !c.outgoing && c.state == NioChannel.State.HANDSHAKE) {
                        handshake.timedOut(c, settings.connectTimeoutMs);
                        close(c, "no handshake in time");
                    } else if (now - c.deadline > 0) {
                        fail(c, "no handshake within " + settings.connectTimeoutMs + " ms");
                    }
                    break;
                case CLOSING:
                    if (now - c.lastRead > idle && !readBeforeJudging(c, now)) {
                        fail(c, "no goodbye from node " + c.peer + " within " + settings.idleTimeoutMs + " ms");
                    } else {
                        flush(c, now);
                    }
                    break;
                default:
                    // A stalled reader has unread bytes waiting: that is not silence.
                    if (now - c.lastRead > idle && !c.stalled && !readBeforeJudging(c, now)) {
                        fail(c, "nothing received from node " + c.peer + " for " + settings.idleTimeoutMs + " ms");
                    } else if (now - c.lastWrite > keepAlive && c.betweenRecords() && c.control.remaining() >= 4) {
                        c.control.putInt(NioWire.KEEP_ALIVE);
                        flush(c, now);
                    }
            }
        }
    }

    /**
     * Reads what the socket holds before a connection is judged silent: after
     * a pause of this process (SIGSTOP, a long GC) housekeeping runs before
     * the selector reports the data that arrived meanwhile. True if something
     * was read (or the read itself ended the connection).
     */
    private boolean readBeforeJudging(NioChannel c, long now) {
        long before = c.lastRead;
        try {
            read(c, now);
        } catch (IOException e) {
            fail(c, describe(e));
            return true;
        } catch (ProtocolException e) {
            fail(c, "protocol error: " + e.getMessage());
            return true;
        }
        return c.lastRead != before || c.state == NioChannel.State.CLOSED || c.stalled;
    }

    /** Test hook: the selector thread sleeps {@code ms} at its next turn, as if this process were paused. */
    void pauseForTest(long ms) {
        pauseMs = ms;
        selector.wakeup();
    }

    /** A connection failed: tell the senders and the core. */
    private void fail(NioChannel c, String reason) {
        if (c.state == NioChannel.State.CLOSED) {
            return;
        }
        if (!c.outgoing && c.state == NioChannel.State.HANDSHAKE) {
            handshake.abandoned(c, reason); // never a connection: counted, logged rate-limited
            close(c, reason);
            return;
        }
        boolean wasOpen = c.state == NioChannel.State.OPEN;
        boolean graceful = c.orderly;
        close(c, reason);
        if (graceful && reason.contains("closed the connection")) {
            return; // the peer said goodbye before closing
        }
        if (c.peerLeaving && c.finalWords == 0) {
            // The peer shut down on purpose: no failure. Only what it did not
            // handle (exact, from its final confirmation) may be lost.
            peerShutdowns.incrementAndGet();
            long unconfirmed = c.outgoing ? c.flow.unconfirmed() : 0;
            if (running && unconfirmed > 0) {
                listener.onPossibleLoss(c.peer, unconfirmed, "node " + c.peer + " shut down before handling them");
            }
            if (wasOpen && running && c.peer >= 0) {
                listener.onDisconnected(c.peer);
            }
            return;
        }
        failures.incrementAndGet();
        long unconfirmed = c.outgoing && c.flow != null ? c.flow.unconfirmed() : 0;
        if (running && wasOpen && unconfirmed > 0) {
            listener.onPossibleLoss(c.peer, unconfirmed, reason);
        }
        if (running) {
            // At most one per peer per second: a peer that keeps failing must not flood the log.
            failureLog.warn(c.peer, "node " + settings.nodeId + ": connection " + (c.outgoing ? "to" : "from") + " node " + c.peer
                    + " failed: " + reason);
        }
        if (wasOpen && running && c.peer >= 0) {
            listener.onDisconnected(c.peer);
        }
    }

    private void close(NioChannel c) {
        close(c, "connection closed");
    }

    /** Closes the socket and forgets the channel; senders waiting for it learn {@code reason}. */
    private void close(NioChannel c, String reason) {
        c.state = NioChannel.State.CLOSED;
        if (c.key != null) {
            c.key.cancel();
        }
        closeQuietly(c.socket);
        if (c.outgoing) {
            c.orb.close();
            outgoing.compareAndSet(c.peer, c, null);
            c.established.completeExceptionally(new IOException(reason));
        } else if (c.peer >= 0 && incoming.get(c.peer) == c) {
            incoming.remove(c.peer);
        }
        if (c.refused != null) {
            c.refused.release();
            c.refused = null;
        }
    }

    private void shutdownChannels() {
        long now = System.nanoTime();
        for (NioChannel c : channels) {
            sayLeaving(c, now);
        }
        for (NioChannel c : channels) {
            close(c);
        }
        NioChannel c;
        while ((c = toConnect.poll()) != null) {
            close(c);
        }
        closeQuietly(server);
        closeQuietly(selector);
    }

    /**
     * Shutting down: tells the peer of an open connection that this is no
     * failure. Senders to us learn exactly how many bytes we handled beyond
     * our last confirmation (the rest was not handled: a possible loss on
     * their side, exact instead of up to a confirmation unit); receivers
     * from us learn that our stream ends. Best effort: a full socket keeps
     * the words, and the peer sees a failure instead.
     */
    private void sayLeaving(NioChannel c, long now) {
        if (c.state != NioChannel.State.OPEN || c.peer < 0) {
            return;
        }
        if (c.outgoing) {
            if (c.control.remaining() >= 4) {
                c.control.putInt(NioWire.LEAVING);
            }
        } else if (incomingId.get(c.peer) == c.id && c.control.remaining() >= 16) {
            int units = confirmations.owed(c.peer, NioWire.MAX_UNITS);
            if (units > 0) {
                c.control.putInt(NioWire.confirmation(units));
                confirmations.sent(c.peer, units);
            }
            long residue = confirmations.residue(c.peer);
            c.control.putInt(NioWire.FINAL).putInt((int) (residue >>> 32)).putInt((int) residue);
        } else {
            return;
        }
        try {
            c.flush(now);
        } catch (IOException e) {
            // the peer sees a failure instead
        }
    }

    private static void closeQuietly(java.io.Closeable c) {
        try {
            c.close();
        } catch (IOException e) {
            // closing anyway
        }
    }

    @Override
    public void close() {
        if (!running) {
            return;
        }
        running = false;
        selector.wakeup();
        try {
            thread.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The peer broke the wire format. */
    static final class ProtocolException extends Exception {
        private static final long serialVersionUID = 1L;

        ProtocolException(String message) {
            super(message);
        }
    }
}
