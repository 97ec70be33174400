package io.ibdxnet.nio;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.transport.WriteInterestManager;
import io.ibdxnet.nio.NioFailure.NioException;
import io.ibdxnet.transport.Confirmations;
import io.ibdxnet.transport.DirectBufferPool;
import io.ibdxnet.transport.IdleStrategy;
import io.ibdxnet.transport.TransportListener;
import java.io.Closeable;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The NIO transport's selector thread: it does all socket work. It connects
 * and accepts, drives the handshake ({@link NioHandshake}), writes what
 * senders published and the confirmations the core owes, hands reads to the
 * {@link NioRecordReader}, runs {@link NioHousekeeping}, and hands every
 * ending to {@link NioConnections#fail} or {@link NioConnections#close}.
 * Other threads reach it only through queues, the write interests and the
 * tables marked as shared.
 */
final class NioReactor {
    private static final Logger LOG = NioLog.LOG;
    private static final long HOUSEKEEPING_NANOS = 50_000_000L;
    /** An incoming connection the core found in violation of the protocol. */
    private static final class Drop {
        final int node;
        final int id;
        final String reason;

        Drop(int node, int id, String reason) {
            this.node = node;
            this.id = id;
            this.reason = reason;
        }
    }

    private final NioSettings settings;
    private final TransportListener listener;
    private final NioHandshake handshake;
    private final Map<Integer, InetSocketAddress> nodes;
    private final Selector selector;
    private final NioAcceptor acceptor;
    private final Thread thread;
    private final NioChannelIo io;
    private final NioHousekeeping housekeeping;
    private final NioAdmission admission;
    /** The idle loop's yield before it blocks in select (selector thread only). */
    private final IdleStrategy idleWait = IdleStrategy.beforeBlocking();

    // Shared with senders and the core (any thread).
    final NioCounters counters = new NioCounters();
    final Confirmations confirmations;
    final WriteInterestManager wim = new WriteInterestManager();
    final NioConnections conns;
    private final ConcurrentLinkedQueue<NioChannel> toConnect = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<Drop> toDrop = new ConcurrentLinkedQueue<>();
    private volatile boolean running = true;
    private volatile boolean sleeping;
    /**
     * In its idle wait (polling, yielding or blocked in select): a sender may
     * write its own frame. Stored with release semantics (no fence on the
     * loop's path; a late view only decides who writes).
     */
    private final java.util.concurrent.atomic.AtomicBoolean idle = new java.util.concurrent.atomic.AtomicBoolean();
    /** {@link #pauseForTest}. */
    private volatile long pauseMs;

    // Selector thread only.
    /** Connects waiting for the previous connection to the node to finish closing. */
    private final List<NioChannel> deferred = new ArrayList<>();
    private long nextHousekeeping;

    NioReactor(NioSettings settings, TransportListener listener, NioHandshake handshake,
            Map<Integer, InetSocketAddress> nodes, DirectBufferPool pool) throws NetworkException {
        this.settings = settings;
        this.listener = listener;
        this.handshake = handshake;
        this.nodes = nodes;
        this.confirmations = new Confirmations(Confirmations.unit(settings.flowControlWindow, settings.flowControlThreshold));
        this.conns = new NioConnections(settings, listener, handshake, confirmations, counters, () -> running);
        this.io = new NioChannelIo(counters, conns, handshake, listener, new NioRecordReader(pool, listener, counters));
        this.housekeeping = new NioHousekeeping(io, conns, settings, handshake);
        this.admission = new NioAdmission(settings.nodeId, handshake, settings.checkPeerAddress);
        InetSocketAddress listen = new InetSocketAddress(settings.listenHost, settings.listenPort);
        if (listen.isUnresolved()) {
            throw new IllegalArgumentException("listen host '" + settings.listenHost + "' does not resolve");
        }
        try {
            this.selector = Selector.open();
        } catch (IOException e) {
            throw new NetworkException(FailureReason.RESOURCES, "cannot open a selector: " + e.getMessage(), e);
        }
        try {
            this.acceptor = new NioAcceptor(settings, listen, selector, admission, handshake, conns, io);
        } catch (NetworkException e) {
            closeQuietly(selector);
            throw e;
        }
        this.thread = new Thread(this::run, "dxnet-nio-" + settings.nodeId);
        thread.setDaemon(true);
        thread.start();
    }

    // ---- any thread ----

    boolean isRunning() {
        return running;
    }

    /** The admission's counters (any thread). */
    void admissionStats(Map<String, Long> m) {
        admission.stats(m);
    }

    /** Connections refused or displaced at admission. */
    long admissionRefused() {
        return admission.refusedUnknown.get() + admission.displaced.get();
    }

    int localPort() {
        return acceptor.localPort();
    }

    /** A sender created {@code c}: the selector thread connects it. */
    void connect(NioChannel c) {
        toConnect.add(c);
        selector.wakeup();
    }

    /** The selector thread waits for work (see {@link #idle}). */
    boolean isIdle() {
        return idle.getAcquire();
    }

    /** Wakes the selector thread if it blocks (a wakeup costs a system call). */
    void wake() {
        if (sleeping) {
            selector.wakeup();
        }
    }

    /** The core found a protocol violation on incoming connection {@code id} from {@code node}. */
    void drop(int node, int id, String reason) {
        toDrop.add(new Drop(node, id, reason));
        selector.wakeup();
    }

    /** Test hook: the selector thread sleeps {@code ms} at its next turn, as if this process were paused. */
    void pauseForTest(long ms) {
        pauseMs = ms;
        selector.wakeup();
        // Back once the selector thread took the pause (it clears pauseMs then),
        // so a test's next step happens during it.
        long end = System.nanoTime() + 10_000_000_000L;
        while (pauseMs != 0 && running && System.nanoTime() - end < 0) {
            LockSupport.parkNanos(100_000);
        }
    }

    /** Stops the selector thread; it tells open connections' peers that we shut down. */
    void stop() {
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

    // ---- the loop ----

    private void run() {
        try {
            while (running) {
                if (pauseMs > 0) {
                    // A test's simulated process pause (pauseForTest), not a back-off: it sleeps to the end.
                    long end = System.nanoTime() + pauseMs * 1_000_000L;
                    pauseMs = 0;
                    while (System.nanoTime() - end < 0) {
                        LockSupport.parkNanos(end - System.nanoTime());
                    }
                }
                startConnects();
                dropViolators();
                serveWriteInterests();
                long now = System.nanoTime();
                boolean stalled = io.retryStalled(now);
                if (now - nextHousekeeping >= 0) {
                    housekeeping.run(now);
                    nextHousekeeping = now + HOUSEKEEPING_NANOS;
                }
                // Idle: poll without blocking for a moment, yielding (cheap to wake),
                // then block in select (a sender's wakeup costs a system call).
                int ready = selector.selectNow();
                idleWait.reset();
                if (ready == 0 && wim.isEmpty()) {
                    idle.setRelease(true);
                }
                while (ready == 0 && !stalled && toConnect.isEmpty() && wim.isEmpty() && idleWait.idle()) {
                    ready = selector.selectNow();
                }
                if (ready == 0) {
                    sleeping = true;
                    if (toConnect.isEmpty() && wim.isEmpty()) {
                        selector.select(stalled ? 1 : HOUSEKEEPING_NANOS / 1_000_000);
                    }
                    sleeping = false;
                }
                if (idle.getPlain()) {
                    idle.setRelease(false); // written on a change only: senders read it
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
            acceptor.accept();
            return;
        }
        NioChannel c = (NioChannel) k.attachment();
        long now = System.nanoTime();
        try {
            if (k.isConnectable()) {
                finishConnect(c, now);
            }
            if (k.isValid() && k.isReadable()) {
                io.read(c, now);
            }
            if (k.isValid() && k.isWritable()) {
                io.flush(c, now);
            }
        } catch (IOException e) {
            conns.fail(c, NioFailure.of(e));
        } catch (CancelledKeyException e) {
            conns.close(c); // closed while its events were handled
        }
    }

    // ---- connect ----

    /** Closes the incoming connections {@link #drop} named, if still open. */
    private void dropViolators() {
        Drop d;
        while ((d = toDrop.poll()) != null) {
            NioChannel c = conns.incoming(d.node);
            if (c != null && c.id() == d.id) {
                conns.fail(c, NioFailure.VIOLATION.exception(d.reason));
            }
        }
    }

    private void startConnects() {
        for (int i = deferred.size() - 1; i >= 0; i--) {
            NioChannel c = deferred.get(i);
            if (conns.closingTo(c.peer()) == null) {
                deferred.remove(i);
                toConnect.add(c);
            }
        }
        NioChannel c;
        while ((c = toConnect.poll()) != null) {
            if (conns.closingTo(c.peer()) != null) {
                // The peer must read the old stream to its goodbye before the new one starts.
                deferred.add(c);
                continue;
            }
            housekeeping.evictFor(c.peer());
            conns.channels.add(c);
            long now = System.nanoTime();
            c.lastRead = now;
            c.lastWrite = now;
            try {
                c.register(selector, SelectionKey.OP_CONNECT);
                if (c.socket.connect(nodes.get(c.peer()))) {
                    finishConnect(c, now);
                }
            } catch (IOException | RuntimeException e) {
                conns.fail(c, NioFailure.of(e));
            }
        }
    }


    private void finishConnect(NioChannel c, long now) throws IOException {
        if (!c.socket.finishConnect()) {
            return;
        }
        c.connected();
        handshake.start(c);
        io.flush(c, now);
    }

    // ---- writing ----

    private void serveWriteInterests() {
        int node;
        long now = System.nanoTime();
        while ((node = wim.next()) >= 0) {
            NioChannel out = conns.outgoing.get(node);
            if (out != null && out.state() == NioChannel.State.OPEN) {
                io.flush(out, now);
            }
            NioChannel in = conns.incoming(node);
            if (in != null && in.state() == NioChannel.State.OPEN) {
                int units = confirmations.owed(node, NioWire.MAX_UNITS);
                if (units > 0 && in.control.remaining() >= 4) {
                    in.control.putInt(NioWire.confirmation(units));
                    confirmations.sent(node, units);
                }
                io.flush(in, now);
            }
        }
    }

    /** The loop ended: peers learn we shut down, waiting senders learn why they got no connection. */
    private void shutdownChannels() {
        NioException why = NioFailure.SHUTDOWN.exception("connection closed");
        conns.closeAll(why);
        NioChannel c;
        while ((c = toConnect.poll()) != null) {
            conns.close(c, why);
        }
        acceptor.close();
        closeQuietly(selector);
    }

    private static void closeQuietly(Closeable c) {
        try {
            c.close();
        } catch (IOException e) {
            // closing anyway
        }
    }
}
