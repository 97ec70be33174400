package io.ibdxnet.nio;

import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/** The transport's counters: written on the selector thread, read by {@code stats()} on any thread. */
final class NioCounters {
    final AtomicLong bytesSent = new AtomicLong();
    final AtomicLong bytesReceived = new AtomicLong();
    /** Socket writes a sender made itself ({@link NioChannel#writeNow}). */
    final AtomicLong writesBySender = new AtomicLong();
    final AtomicLong failures = new AtomicLong();
    /** Connections whose peer shut down on purpose (LEAVING / FINAL), not counted as failures. */
    final AtomicLong peerShutdowns = new AtomicLong();
    final AtomicLong evictions = new AtomicLong();
    final AtomicLong keepAlives = new AtomicLong();

    /** Puts the counters under their stats names (after {@code connections}, before {@code rejected}). */
    void putTraffic(Map<String, Long> m) {
        m.put("bytes_sent", bytesSent.get());
        m.put("bytes_received", bytesReceived.get());
        m.put("writes_by_sender", writesBySender.get());
    }

    /** Puts the connection-ending counters under their stats names. */
    void putEndings(Map<String, Long> m) {
        m.put("failures", failures.get());
        m.put("peer_shutdowns", peerShutdowns.get());
        m.put("evictions", evictions.get());
        m.put("keep_alives", keepAlives.get());
    }
}
