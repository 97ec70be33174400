package io.ibdxnet.app.cluster;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Requests sent and not yet ended, so a node that stops can write each one
 * still open as {@code pending} (the checker calls it hung when its deadline
 * had passed by then) and can wait for them before it closes.
 */
final class RequestsInFlight {
    /** "dest seq" to the request's deadline (wall-clock ms). */
    private final Map<String, Long> open = new ConcurrentHashMap<>();

    void opened(int dest, long seq, long deadline) {
        open.put(dest + " " + seq, deadline);
    }

    /** False if it had already ended (an outcome is written once). */
    boolean ended(int dest, long seq) {
        return open.remove(dest + " " + seq) != null;
    }

    boolean isEmpty() {
        return open.isEmpty();
    }

    /** Writes every open request as pending and forgets it. */
    void writePending(HistoryLog log) {
        for (String key : open.keySet()) {
            if (open.remove(key) != null) {
                String[] k = key.split(" ");
                log.write("reqend", k[0], k[1], "pending", "-", "still open when the node stopped");
            }
        }
    }
}
