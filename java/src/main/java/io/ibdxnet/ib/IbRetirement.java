package io.ibdxnet.ib;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.core.Frame;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.ib.IbTransport.Connection;
import io.ibdxnet.transport.OutgoingRingBuffer;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Logger;

/**
 * The ib transport's connections after their close: closed for writers,
 * handed to the native send thread, which settles each once and releases our
 * handle on its ring; after an orderly close, records that were published but
 * never posted go to the node's next connection before anything newer.
 */
final class IbRetirement {
    private static final Logger LOG = Logger.getLogger(IbTransport.class.getName());
    /** One line per node and second at most: closes can repeat as fast as a peer reconnects. */
    private final RateLimitedLog strandedLog = new RateLimitedLog(LOG, 1_000);
    private final IbTransport t;
    /**
     * Closed connections whose native handle the send thread releases at the
     * start of its next up-call: it may be inside an up-call holding one of
     * them right now, and their rings must outlive that.
     */
    private final ConcurrentLinkedQueue<Connection> retired = new ConcurrentLinkedQueue<>();
    /** Writes records stranded by an orderly close to the node's next connection (see {@link #settle}). */
    private final ExecutorService resender = Executors.newSingleThreadExecutor(r -> {
        Thread th = new Thread(r, "ibdxnet-resend");
        th.setDaemon(true);
        return th;
    });
    private final AtomicLong resent = new AtomicLong();

    IbRetirement(IbTransport transport) {
        this.t = transport;
    }

    /** Bytes of stranded records written to a node's next connection. */
    long resent() {
        return resent.get();
    }

    /** Send thread, at the start of an up-call: settles what was retired since. */
    void settleRetired() {
        Connection r;
        while ((r = retired.poll()) != null) {
            settle(r);
        }
    }

    /** Ends resending (before the engine frees the rings), waiting up to {@code waitMs}. */
    void stopResending(long waitMs) {
        resender.shutdownNow();
        try {
            resender.awaitTermination(waitMs, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** {@code c} if its native connection closed: see {@link #retire}. */
    void retireIfClosed(Connection c) {
        if (!t.engine.connectionOpen(c.connectionId)) {
            retire(c, false);
        }
    }

    /**
     * Closes {@code c} for writers and hands it to the send thread, which
     * settles it and releases our handle on its native ring — once per
     * connection (settling twice read a released ring). An orderly close
     * leaves it in place (closed) until then: senders wait for its successor.
     */
    void retire(Connection c, boolean failed) {
        if (!c.retiring.compareAndSet(false, true)) {
            return;
        }
        c.orderly = !failed;
        c.orb.close();
        // Writers bail out of reserve on close; wait for those mid-copy
        // before the native ring can be released. Not a back-off (no IdleStrategy):
        // a bounded spin on copies already under way, ending within microseconds.
        while (c.writers.get() > 0) {
            Thread.onSpinWait();
        }
        if (!t.closing) {
            retired.add(c);
        } else if (!failed) {
            t.connections.compareAndSet(c.node, c, null);
        }
    }

    /**
     * Send thread: a retired connection. After an orderly close, records that
     * were published but never posted (the close raced with their sender) go
     * to the node's next connection before anything newer: a resender thread
     * connects, writes them, then installs the new connection. The same for a
     * connection a resend was filling when it closed (not yet the node's).
     */
    private void settle(Connection r) {
        if (r.orderly && (t.connections.get(r.node) == r || r.installing)) {
            byte[] stranded = r.orb.copyStranded();
            if (stranded.length > 0) {
                resender.execute(() -> resend(r, stranded));
            } else {
                t.connections.compareAndSet(r.node, r, null);
            }
        }
        try {
            t.engine.releaseConnection(r.connectionId);
        } catch (EngineClosedException e) {
            // the engine is being destroyed: it frees every connection itself
        }
    }

    /** Resender thread: {@code stranded} (whole records of {@code old}) first on a new connection. */
    private void resend(Connection old, byte[] stranded) {
        int node = old.node;
        t.connectLocks.lock(node);
        try {
            Connection n = null;
            try {
                n = t.open(node);
                n.installing = true;
                n.orb.ensureWindow(stranded.length); // nothing is posted from it before it is installed
                long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(t.connectTimeoutMs);
                byte[] word = new byte[4];
                for (int at = 0; at < stranded.length; ) {
                    int len = Frame.getInt(stranded, at);
                    System.arraycopy(stranded, at, word, 0, 4);
                    n.write(word, stranded, at + 4, len - 4, deadline, false);
                    at += OutgoingRingBuffer.aligned(len);
                }
                if (t.connections.compareAndSet(node, old, n) || t.connections.compareAndSet(node, null, n)) {
                    resent.addAndGet(stranded.length);
                    t.wim.pushData(node);
                    t.sendPublished();
                    retireIfClosed(n); // closed while we wrote: settled (and resent) in turn
                } else {
                    // A newer connection took the node's place (after a failure): these
                    // records cannot go before what it holds.
                    retire(n, true);
                    throw new NetworkException(FailureReason.DISCONNECTED, "the node's connection was replaced while resending");
                }
            } catch (NetworkException e) {
                if (n != null) {
                    retire(n, true); // its handle goes back
                }
                t.connections.compareAndSet(node, old, null);
                t.lostOnClose.incrementAndGet();
                strandedLog.warn("stranded", node, stranded.length + " bytes to node " + node
                        + " stranded by an orderly close could not be resent: " + e.getMessage());
                t.listener.onPossibleLoss(node, stranded.length, "stranded by an orderly close, not resent: " + e.getMessage());
                t.listener.onDisconnected(node);
            }
        } finally {
            t.connectLocks.unlock(node);
        }
    }
}
