package io.ibdxnet.ib;

import io.ibdxnet.ib.IbTransport.Connection;
import io.ibdxnet.transport.Confirmations;
import io.ibdxnet.transport.IncomingBuffer;

/**
 * The ib transport's side of the native threads' up-calls
 * ({@link EngineCallbacks}): the send thread learns what was posted and
 * completed and takes the next package, the receive thread hands over
 * received buffers and flow-control confirmations, the job thread reports
 * node events. Split out of {@link IbTransport}: they work on its
 * connections and counters.
 */
final class IbEngineThreads implements EngineCallbacks {
    private static final java.util.logging.Logger LOG = java.util.logging.Logger.getLogger(IbTransport.class.getName());
    private final IbTransport t;
    // Send-thread state: flyweights, reused.
    private final PrevWorkResults prev = new PrevWorkResults();
    private final CompletedWorkList completed = new CompletedWorkList();
    private final NextWorkPackage next = new NextWorkPackage();
    // Receive-thread state.
    private final IncomingRing ring = new IncomingRing();
    /** Send thread: the connection of the package handed out last. */
    private int packageConnection;
    /** Send thread: that package stopped at its ring window's end with more ready behind it. */
    private boolean packageCut;

    IbEngineThreads(IbTransport transport) {
        this.t = transport;
    }

    /**
     * The unit {@code node} confirms in on connection {@code conn}: what its
     * exchange named (the native parser refused any outside
     * [{@link Confirmations#MIN_UNIT}, {@link Confirmations#MAX_UNIT}]), or
     * ours if the connection is already gone (nothing on it is confirmed then).
     */
    private long peerUnit(int node, int conn) {
        long u = 0;
        try {
            u = t.engine.peerFlowUnit(node, conn);
        } catch (IllegalStateException e) {
            // the engine is closing (EngineClosedException): no confirmation matters any more
        }
        return Confirmations.acceptable(u) ? u : t.confirmations.unit();
    }

    // ---- native send thread ----

    @Override
    public int nextDataToSend(long prevAddress, long completedAddress, long nextAddress) {
        prev.wrap(prevAddress);
        int pn = prev.nodeId();
        if (pn != PrevWorkResults.NO_NODE) {
            Connection c = t.connections.get(pn);
            boolean more = false;
            if (c != null && c.connectionId == packageConnection) {
                c.orb.posted(prev.bytesPosted());
                more = packageCut; // it stopped at the ring window's end: the rest is next
            }
            t.confirmations.sent(pn, prev.fcPosted());
            if (more || prev.bytesNotPosted() > 0 || prev.fcNotPosted() > 0) {
                t.wim.pushData(pn); // send queue full or not connected yet: try again later
            }
        }
        // The hand-over is idempotent: what is applied is marked so, and only the
        // acknowledgement at the end lets the engine clear it. An exception before
        // it leaves the rest to the next call; nothing is applied twice.
        completed.wrap(completedAddress);
        completed.markPrevApplied();
        // After the previous package is accounted: nothing more is posted from these.
        t.retirement.settleRetired();
        for (int i = 0, n = completed.count(); i < n; i++) {
            long bytes = completed.bytes(i);
            if (bytes == 0) {
                continue; // applied in an earlier call (or flow control only)
            }
            Connection c = t.connections.get(completed.nodeId(i));
            if (c != null && c.connectionId == completed.connection(i)) {
                c.orb.confirmed(bytes);
                c.orb.rewindIfEmpty(); // the ring's memory follows its backlog, not its traffic
            }
            completed.markApplied(i);
        }
        completed.acknowledge();
        int node = t.wim.next();
        if (node < 0) {
            return OK;
        }
        Connection c = t.connections.get(node);
        if (c != null && c.orb.isClosed()) {
            c = null; // closed, its successor is on the way: no package from it
        }
        long ready = c == null ? 0 : c.orb.postable(); // up to the ring window's end: the engine wraps at the ring's
        // Queue the node again only then: re-queued whenever more was ready, a node
        // went out in smaller packages (64 nodes all to all: 0.44-0.69x the rate).
        packageCut = ready > 0 && ready < c.orb.readyToPost();
        int offset = c == null ? 0 : c.orb.postOffset();
        int fc = t.confirmations.owed(node, NextWorkPackage.FC_DATA_MAX);
        if (ready > 0 || fc > 0) {
            packageConnection = c == null ? NextWorkPackage.CONNECTION_NONE : c.connectionId;
            next.wrap(nextAddress).set(node, fc, offset, ready, packageConnection);
        }
        return OK;
    }

    // ---- native receive thread ----

    @Override
    public int received(long ringAddress) {
        ring.wrap(ringAddress);
        int n = ring.used();
        int i = 0;
        for (; i < n; i++) {
            int source = ring.sourceNodeId(i);
            int id = ring.bufferId(i);
            int conn = ring.connection(i);
            if (t.incomingConnection(source) != conn) {
                t.incomingConnection.set(source, conn ^ NextWorkPackage.CONNECTION_NONE);
                t.confirmations.reset(source, peerUnit(source, conn));
            }
            if (id != IncomingRing.NO_BUFFER) {
                IncomingBuffer b = new IncomingBuffer(source, ring.dataAddress(i), ring.dataLength(i), conn, id, t.releaser);
                if (!t.listener.onBuffer(b)) {
                    break; // the core is full: leave the rest in the ring (backpressure)
                }
            }
            int fc = ring.fcData(i);
            if (fc > 0) {
                Connection c = t.connections.get(source);
                if (c != null && c.connectionId == conn) {
                    c.flow.confirm(fc); // confirmations of an old connection are not this one's
                }
            }
        }
        return EngineCallbacks.consumed(i);
    }

    // ---- native job thread ----

    @Override
    public void nodeEvent(int kind, int nodeId, long value) {
        if (kind == NodeEvents.LOST) {
            t.lostOnClose.incrementAndGet();
            LOG.warning("data in flight to node " + nodeId + " on a connection closed in order did not arrive");
            t.listener.onPossibleLoss(nodeId, -1, "data in flight on a connection closed in order did not arrive");
            t.listener.onDisconnected(nodeId);
            return;
        }
        if (kind != NodeEvents.DISCONNECTED && kind != NodeEvents.CLOSED && kind != NodeEvents.LEFT) {
            return;
        }
        boolean failed = kind != NodeEvents.CLOSED;
        boolean left = kind == NodeEvents.LEFT;
        if (left) {
            t.peerShutdowns.incrementAndGet();
        }
        // The event names the node, not the connection: ours is retired only if it
        // is the one that closed (a newer one may be in use, or ours may have been
        // retired by an earlier close already). Shutting down, the engine must not
        // be called back: everything goes.
        Connection c = t.connections.get(nodeId);
        if (c != null && (t.closing || !t.engine.connectionOpen(c.connectionId))) {
            if (failed) {
                t.connections.compareAndSet(nodeId, c, null);
                // A peer that shut down in order said what it handled beyond its
                // confirmations (a value beyond what we sent is ignored): the rest is
                // exactly what it did not handle.
                if (left && value >= 0) {
                    c.flow.confirmFinal(value);
                }
                long unconfirmed = c.flow.unconfirmed();
                if (!t.closing && unconfirmed > 0) {
                    t.listener.onPossibleLoss(nodeId, unconfirmed,
                            left ? "node " + nodeId + " shut down before handling them" : "the connection failed");
                }
            }
            t.retirement.retire(c, failed);
        }
        if (failed) {
            t.listener.onDisconnected(nodeId);
        }
    }
}
