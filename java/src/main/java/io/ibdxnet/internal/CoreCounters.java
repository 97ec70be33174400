package io.ibdxnet.internal;

import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The core's own counters, reported next to the transport's by {@link io.ibdxnet.DXNet#transportStats}
 * (their meanings: {@link StatsKeys#CORE}).
 */
public final class CoreCounters {
    /** Messages dropped: unknown type, no receiver, late response, bad payload. */
    public final AtomicLong dropped = new AtomicLong();
    final AtomicLong violations = new AtomicLong();
    final AtomicLong streamErrors = new AtomicLong();
    final AtomicLong partialsDropped = new AtomicLong();
    final AtomicLong bytesDropped = new AtomicLong();
    final AtomicLong responsesRefused = new AtomicLong();
    final AtomicLong handlerErrors = new AtomicLong();
    /** Buffers confirmed before their handlers returned: a handler waited for the window of their source. */
    final AtomicLong confirmedBeforeHandled = new AtomicLong();
    public final AtomicLong repliesFailed = new AtomicLong();
    public final AtomicLong possibleLosses = new AtomicLong();
    /** Received messages copied together from several frames or receive buffers (the others are imported in place). */
    final AtomicLong receivedCopied = new AtomicLong();
    /** Sends of handlers on a receiving thread that could not go out at once (deferred instead of waiting). */
    public final AtomicLong receivingThreadSendsDeferred = new AtomicLong();
    /** Notices sent to the sources of plain messages dropped here ({@link DropNotice}). */
    public final AtomicLong dropNoticesSent = new AtomicLong();
    /** Notices received from nodes that dropped plain messages of ours. */
    public final AtomicLong dropNoticesReceived = new AtomicLong();

    /** Adds the counters to {@code m} under their documented names (violations summed with the transport's). */
    public void addTo(Map<String, Long> m) {
        m.merge("protocol_violations", violations.get(), Long::sum);
        m.put("stream_errors", streamErrors.get());
        m.put("partial_messages_dropped", partialsDropped.get());
        m.put("bytes_dropped_after_violation", bytesDropped.get());
        m.put("responses_from_wrong_node", responsesRefused.get());
        m.put("handler_errors", handlerErrors.get());
        m.put("confirmed_before_handled", confirmedBeforeHandled.get());
        m.put("replies_failed", repliesFailed.get());
        m.put("possible_losses", possibleLosses.get());
        m.put("messages_received_copied", receivedCopied.get());
        m.put("receiving_thread_sends_deferred", receivingThreadSendsDeferred.get());
        m.put("drop_notices_sent", dropNoticesSent.get());
        m.put("drop_notices_received", dropNoticesReceived.get());
    }
}
