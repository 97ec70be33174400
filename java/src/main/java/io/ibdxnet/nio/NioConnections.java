package io.ibdxnet.nio;

import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.nio.NioFailure.NioException;
import io.ibdxnet.transport.Confirmations;
import io.ibdxnet.transport.NodeInts;
import io.ibdxnet.transport.NodeRefs;
import io.ibdxnet.transport.TransportListener;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.logging.Logger;

/**
 * The NIO transport's connections per node, and how each ends: the one
 * place that decides what an ending means ({@link #fail}) and which events
 * the core hears. The selector thread changes the tables; senders and the
 * core read the two marked as shared.
 */
final class NioConnections {
    static final int NODES = io.ibdxnet.transport.NodeId.COUNT;
    private static final Logger LOG = NioLog.LOG;

    private final RateLimitedLog failureLog = new RateLimitedLog(LOG, 1_000);
    private final NioSettings settings;
    private final TransportListener listener;
    private final NioHandshake handshake;
    private final Confirmations confirmations;
    private final NioCounters counters;
    /** False once the transport closes: endings then raise no events. */
    private final BooleanSupplier running;

    /** Shared: per node, the outgoing channel senders write to (set by senders, cleared here). */
    final NodeRefs<NioChannel> outgoing = new NodeRefs<>();
    /**
     * Shared: the current incoming channel's id per node (consumed bytes of
     * older ones are not confirmed); 0 (ids start at 1): none yet.
     */
    final NodeInts incomingId = new NodeInts();
    /** Every channel not yet closed and forgotten by housekeeping. */
    final List<NioChannel> channels = new ArrayList<>();
    /** Per node: the open incoming channel. */
    private final Map<Integer, NioChannel> incoming = new HashMap<>();
    /** Per node: {instance, id} of the last incoming connection that ended with a goodbye. */
    private final Map<Integer, long[]> goodbyes = new HashMap<>();
    /**
     * Nodes that left (said so on our connection to them) while their own
     * connection to us was still open: their disconnect is told when that
     * one ends, after what it carried (an answer sent before the shutdown
     * may still be on it).
     */
    private final Set<Integer> leftWhileSending = new HashSet<>();

    NioConnections(NioSettings settings, TransportListener listener, NioHandshake handshake,
            Confirmations confirmations, NioCounters counters, BooleanSupplier running) {
        this.settings = settings;
        this.listener = listener;
        this.handshake = handshake;
        this.confirmations = confirmations;
        this.counters = counters;
        this.running = running;
    }

    NioChannel incoming(int node) {
        return incoming.get(node);
    }

    /** An outgoing channel to {@code node} that is being closed on purpose, or null. */
    NioChannel closingTo(int node) {
        for (NioChannel c : channels) {
            if (c.outgoing && c.peer() == node && c.state() == NioChannel.State.CLOSING) {
                return c;
            }
        }
        return null;
    }

    /**
     * Incoming: the hello (and proof) passed, the peer's stream starts. A
     * connection it still has here is stale: the peer opens a new one only
     * after its old one ended (an orderly close, or a failure it saw first —
     * a half-open connection), so the new one replaces it.
     */
    void accept(NioChannel c) {
        int source = c.handshake.source;
        long peerInstance = c.handshake.peerInstance;
        long peerUnit = c.handshake.peerUnit;
        NioChannel old = incoming.get(source);
        handshake.accept(c);
        if (old != null) {
            fail(old, NioFailure.REPLACED.exception(old.instance() == peerInstance
                    ? "node " + source + " connected again (its old connection is stale)"
                    : "node " + source + " connected again (restarted)"));
        }
        long[] last = goodbyes.remove(source);
        // The same stream, continued after an eviction, keeps its id.
        c.open(source, peerInstance, last != null && last[0] == peerInstance ? (int) last[1] : c.id());
        // The sender starts a fresh window (bytes of the old connection still being
        // processed may credit it once more: at most one window extra, once),
        // confirmed in the unit its hello named.
        confirmations.reset(source, peerUnit);
        incoming.put(source, c);
        incomingId.set(source, c.id());
    }

    /** Incoming: the sender said goodbye; its stream continues on its next connection under the same id. */
    void goodbye(NioChannel c) {
        goodbyes.put(c.peer(), new long[] {c.instance(), c.id()});
        close(c);
    }

    /**
     * A connection ended without being closed on purpose here. What it means
     * is decided by its kind and the channel's state, never by the text:
     * an incoming handshake is only counted; the peer's expected close after
     * its goodbye or its shutdown words is no failure; anything else is, and
     * unconfirmed bytes become a possible-loss event.
     */
    void fail(NioChannel c, NioException why) {
        if (c.state() == NioChannel.State.CLOSED) {
            return;
        }
        if (!c.outgoing && c.state() == NioChannel.State.HANDSHAKE) {
            handshake.abandoned(c, why.getMessage()); // never a connection: counted, logged rate-limited
            close(c, why);
            return;
        }
        boolean wasOpen = c.state() == NioChannel.State.OPEN;
        boolean told = close(c, why);
        if (c.orderly && why.kind() == NioFailure.PEER_CLOSED) {
            return; // we are closing in order (evicted): the peer's close is expected
        }
        if (c.peerLeft()) {
            // The peer shut down on purpose: no failure. Only what it did not
            // handle (exact, from its final confirmation) may be lost.
            counters.peerShutdowns.incrementAndGet();
            long unconfirmed = c.outgoing ? c.flow.unconfirmed() : 0;
            if (running.getAsBoolean() && unconfirmed > 0) {
                listener.onPossibleLoss(c.peer(), unconfirmed, "node " + c.peer() + " shut down before handling them");
            }
            if (c.outgoing && wasOpen && incoming.containsKey(c.peer())) {
                leftWhileSending.add(c.peer()); // told when its own connection ends (see close)
            } else if (!told) {
                disconnected(c, wasOpen);
            }
            return;
        }
        counters.failures.incrementAndGet();
        long unconfirmed = c.outgoing && c.flow != null ? c.flow.unconfirmed() : 0;
        if (running.getAsBoolean() && wasOpen && unconfirmed > 0) {
            listener.onPossibleLoss(c.peer(), unconfirmed, why.getMessage());
        }
        if (running.getAsBoolean()) {
            // At most one per peer per second: a peer that keeps failing must not flood the log.
            failureLog.warn("connection failed", c.peer(), "node " + settings.nodeId + ": connection " + (c.outgoing ? "to" : "from") + " node "
                    + c.peer() + " failed: " + why.getMessage());
        }
        if (!told) {
            disconnected(c, wasOpen);
        }
    }

    private void disconnected(NioChannel c, boolean wasOpen) {
        if (wasOpen && running.getAsBoolean() && c.peer() >= 0) {
            listener.onDisconnected(c.peer());
        }
    }

    /** Closes {@code c} on purpose (an orderly end, a refusal, a cancelled key). */
    void close(NioChannel c) {
        close(c, NioFailure.CLOSED.exception("connection closed"));
    }

    /**
     * Closes the socket and forgets the channel; senders waiting for it learn
     * {@code why}. True if that told the disconnect of a node that had left
     * while this, its connection to us, was open.
     */
    boolean close(NioChannel c, NioException why) {
        c.closed(why);
        if (c.outgoing) {
            outgoing.compareAndSet(c.peer(), c, null);
        } else if (c.peer() >= 0 && incoming.get(c.peer()) == c) {
            incoming.remove(c.peer());
            if (leftWhileSending.remove(c.peer())) {
                disconnected(c, true);
                return true;
            }
        }
        return false;
    }

    /** Evicted: {@code c} takes no more frames; it flushes, says goodbye, and the peer closes. */
    void evict(NioChannel c) {
        counters.evictions.incrementAndGet();
        c.startClosing(); // senders that race with this retry on a new connection
        outgoing.compareAndSet(c.peer(), c, null);
    }

    /**
     * Set before the reactor stops when the core handled everything it
     * consumed: only then do the senders to us get the exact count (FINAL);
     * otherwise they see the close as a failure and report what we did not
     * confirm.
     */
    volatile boolean tellHandled;

    /** This node shuts down: tells the peers of open connections, then closes every channel. */
    void closeAll(NioException why) {
        long now = System.nanoTime();
        for (NioChannel c : channels) {
            sayLeaving(c, now);
        }
        for (NioChannel c : channels) {
            close(c, why);
        }
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
        if (c.state() != NioChannel.State.OPEN || c.peer() < 0) {
            return;
        }
        if (c.outgoing) {
            if (c.control.remaining() >= 4) {
                c.control.putInt(NioWire.LEAVING);
            }
        } else if (tellHandled && incomingId.get(c.peer()) == c.id() && c.control.remaining() >= 16) {
            int units = confirmations.owed(c.peer(), NioWire.MAX_UNITS);
            if (units > 0) {
                c.control.putInt(NioWire.confirmation(units));
                confirmations.sent(c.peer(), units);
            }
            long residue = confirmations.residue(c.peer());
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

}
