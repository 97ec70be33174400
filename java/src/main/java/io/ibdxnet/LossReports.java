package io.ibdxnet;

import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.internal.CoreCounters;
import java.util.logging.Level;

/**
 * Where a node's possible losses and connection events go: the listeners the
 * application set, else the log. The listeners are held as this file's own
 * interfaces (DXNet adapts its public ones), so this file need not name DXNet,
 * which names it.
 */
final class LossReports {
    /** {@code DXNet.LossListener} as this file sees it. */
    interface LossSink {
        void possiblyLost(int node, long bytes, String reason);
    }

    /** {@code DXNet.ConnectionListener} as this file sees it: one method, so DXNet adapts it with a lambda. */
    interface ConnectionSink {
        void changed(int node, boolean connected);
    }

    private final int nodeId;
    private final CoreCounters counters;
    private final RateLimitedLog warnings;
    volatile LossSink lossListener;
    volatile ConnectionSink connectionListener;

    LossReports(int nodeId, CoreCounters counters, RateLimitedLog warnings) {
        this.nodeId = nodeId;
        this.counters = counters;
        this.warnings = warnings;
    }

    /** {@code node} dropped plain messages of ours: a possible loss, for the listener or the log. */
    void dropReported(int node, long messages, long bytes, String causes) {
        counters.dropNoticesReceived.incrementAndGet();
        possiblyLost(node, Math.max(-1, bytes), "node " + node + " dropped " + messages + " message"
                + (messages == 1 ? "" : "s") + " (" + bytes + " payload bytes) it could not hand to a receiver: " + causes,
                false);
    }

    /** A transport reports unconfirmed bytes of a failed connection: the listener hears it, or the log. */
    void possiblyLost(int node, long bytes, String reason) {
        possiblyLost(node, bytes, reason, true);
    }

    /** The listener hears of a possible loss, or the log ({@code unconfirmed}: the bytes were not confirmed). */
    private void possiblyLost(int node, long bytes, String reason, boolean unconfirmed) {
        counters.possibleLosses.incrementAndGet();
        LossSink l = lossListener;
        if (l != null) {
            try {
                l.possiblyLost(node, bytes, reason);
                return;
            } catch (RuntimeException e) {
                warnings.log(Level.WARNING, "loss listener failed", node, "node " + nodeId
                        + ": the loss listener failed for node " + node, e);
            }
        }
        warnings.warn("possible loss", node, "node " + nodeId + ": messages sent to node " + node + " may be lost ("
                + (bytes < 0 || !unconfirmed ? "" : bytes + " bytes unconfirmed, ") + reason + ")");
    }

    void connectionEvent(int node, boolean connected) {
        ConnectionSink l = connectionListener;
        if (l == null) {
            return;
        }
        try {
            l.changed(node, connected);
        } catch (RuntimeException e) {
            warnings.log(Level.WARNING, "connection listener failed", node, "node " + nodeId
                    + ": the connection listener failed for node " + node, e);
        }
    }
}
