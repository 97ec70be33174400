package io.ibdxnet;

import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/** The core's own counters, reported next to the transport's by {@link DXNet#transportStats}. */
final class CoreCounters {
    /** Messages dropped: unknown type, no receiver, late response, bad payload. */
    final AtomicLong dropped = new AtomicLong();
    final AtomicLong violations = new AtomicLong();
    final AtomicLong streamErrors = new AtomicLong();
    final AtomicLong partialsDropped = new AtomicLong();
    final AtomicLong bytesDropped = new AtomicLong();
    final AtomicLong responsesRefused = new AtomicLong();
    final AtomicLong handlerErrors = new AtomicLong();
    final AtomicLong repliesFailed = new AtomicLong();
    final AtomicLong possibleLosses = new AtomicLong();
    /** Received messages copied together from several frames or receive buffers (the others are imported in place). */
    final AtomicLong receivedCopied = new AtomicLong();

    /** Adds the counters to {@code m} under their documented names (violations summed with the transport's). */
    void addTo(Map<String, Long> m) {
        m.merge("protocol_violations", violations.get(), Long::sum);
        m.put("stream_errors", streamErrors.get());
        m.put("partial_messages_dropped", partialsDropped.get());
        m.put("bytes_dropped_after_violation", bytesDropped.get());
        m.put("responses_from_wrong_node", responsesRefused.get());
        m.put("handler_errors", handlerErrors.get());
        m.put("replies_failed", repliesFailed.get());
        m.put("possible_losses", possibleLosses.get());
        m.put("messages_received_copied", receivedCopied.get());
    }
}
