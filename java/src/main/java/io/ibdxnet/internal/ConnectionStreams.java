package io.ibdxnet.internal;

import io.ibdxnet.core.ProtocolViolation;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.core.ReceiveLimits;
import io.ibdxnet.core.StreamAssembler;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.NodeRefs;
import io.ibdxnet.transport.Transport;
import java.util.logging.Level;

/**
 * The receive path's streams, one per source's connection, each assembled
 * into messages under the node's receive limits. Whatever a peer's bytes do,
 * only its connection suffers.
 */
final class ConnectionStreams {
    private final int nodeId;
    private final Transport transport;
    private final PendingRequests requests;
    private final CoreCounters counters;
    private final RateLimitedLog warnings;
    final ReceiveLimits limits;
    private final NodeRefs<StreamAssembler> assemblers = new NodeRefs<>();

    ConnectionStreams(int nodeId, ReceiveLimits limits, Transport transport, PendingRequests requests,
            CoreCounters counters, RateLimitedLog warnings) {
        this.nodeId = nodeId;
        this.limits = limits;
        this.transport = transport;
        this.requests = requests;
        this.counters = counters;
        this.warnings = warnings;
    }

    /**
     * One buffer into the stream of its connection. Whatever its bytes do,
     * only that connection suffers: a violation (or any other failure while
     * parsing) closes it, its unfinished messages are dropped and the rest of
     * its bytes skipped; every other stream and this thread go on. False if
     * the stream waits for the node budget in this buffer (its
     * {@link IncomingBuffer#parsed} bytes are in; none confirmed yet).
     */
    boolean parse(IncomingBuffer b, StreamAssembler.Sink sink) {
        StreamAssembler a = assemblers.get(b.source);
        if (a == null || a.connection() != b.connection) {
            if (a != null) {
                counters.partialsDropped.addAndGet(a.discard()); // its connection ended: a new stream starts
            }
            a = new StreamAssembler(b.source, b.connection, limits);
            assemblers.set(b.source, a);
        }
        if (a.broken()) {
            counters.bytesDropped.addAndGet(b.length);
            return true;
        }
        String reason;
        try {
            int from = b.parsed; // more than 0 when its stream waited for the node budget in this buffer
            b.parsed = from + a.feed(b.address + from, b.length - from, sink);
            return !a.waiting();
        } catch (ProtocolViolation e) {
            counters.violations.incrementAndGet();
            reason = "protocol violation: " + e.getMessage();
        } catch (Throwable e) {
            counters.streamErrors.incrementAndGet();
            reason = "receiving failed: " + e;
            warnings.log(Level.SEVERE, "stream failed", b.source, "node " + nodeId + ": the stream of node " + b.source
                    + " failed", e);
        }
        counters.bytesDropped.addAndGet(b.length - b.parsed);
        fail(a, reason);
        return true;
    }

    /** Closes the connection of a stream that broke; drops its unfinished messages. */
    private void fail(StreamAssembler a, String reason) {
        int source = a.source();
        counters.partialsDropped.addAndGet(a.discard());
        warnings.warn("closing connection", source, "node " + nodeId + ": closing the connection from node "
                + source + ": " + reason);
        try {
            transport.closeConnection(source, a.connection(), reason);
        } catch (RuntimeException e) {
            warnings.caused(Level.WARNING, "close failed", source, "node " + nodeId + ": closing the connection from node "
                    + source + " failed", e);
        }
        requests.failTo(source, "node " + source + " disconnected: " + reason);
    }
}
