package io.ibdxnet;

import io.ibdxnet.core.HandlerDispatch;
import io.ibdxnet.core.IncomingBufferQueue;
import io.ibdxnet.internal.CoreCounters;
import io.ibdxnet.internal.IncomingPath;
import io.ibdxnet.internal.MessageSender;
import io.ibdxnet.internal.PendingRequests;
import io.ibdxnet.internal.StatsKeys;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The core's counters and gauges by name: what {@code DXNet.transportStats}
 * adds to the transport's, and the MBean's own map (their meanings:
 * {@link StatsKeys#CORE}, {@link StatsKeys#NODE_MBEAN}).
 */
final class NodeStats {
    private final CoreCounters counters;
    private final PendingRequests requests;
    private final IncomingBufferQueue ibq;
    private final HandlerDispatch handlers;
    private final MessageSender sender;
    private final IncomingPath incoming;

    NodeStats(CoreCounters counters, PendingRequests requests, IncomingBufferQueue ibq, HandlerDispatch handlers,
            MessageSender sender, IncomingPath incoming) {
        this.counters = counters;
        this.requests = requests;
        this.ibq = ibq;
        this.handlers = handlers;
        this.sender = sender;
        this.incoming = incoming;
    }

    /**
     * The core's counters alone (MBean {@code io.ibdxnet:type=Node,node=<id>}):
     * those of {@code DXNet.transportStats} that are not the transport's, with
     * {@code protocol_violations} the core's own, and {@code messages_dropped}
     * ({@code DXNet.droppedMessages}), {@code pending_requests} and the gauges of
     * what this node holds for a slow consumer.
     */
    Map<String, Long> coreStats() {
        Map<String, Long> m = new LinkedHashMap<>();
        m.put("messages_dropped", counters.dropped.get());
        addCoreCounters(m);
        m.put("pending_requests", (long) requests.size());
        m.put("incoming_buffers_queued", (long) ibq.size());
        m.put("incoming_bytes_queued", ibq.bytes());
        m.put("handler_batches_queued", (long) handlers.queued());
        m.put("handler_bytes_queued", handlers.queuedBytes());
        return m;
    }

    void addCoreCounters(Map<String, Long> m) {
        counters.addTo(m);
        sender.addTo(m);
        m.put("unfinished_bytes_claimed", incoming.unfinishedBytesClaimed());
        m.put("buffers_received_inline", incoming.inlineBuffers());
        m.put("batches_handled_on_receiving_thread", incoming.handledOnReceivingThread());
        m.put("ibq_spilled_buffers", ibq.spilledBuffers());
        m.put("ibq_spilled_bytes", ibq.spilledBytes());
        m.put("ibq_bytes_beyond_share", ibq.bytesBeyondShare());
    }
}
