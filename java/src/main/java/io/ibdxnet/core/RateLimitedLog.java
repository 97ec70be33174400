package io.ibdxnet.core;

import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Logger;

/**
 * Warnings about one peer at most once per interval: a hostile or broken
 * peer must not be able to flood the log. The next warning that gets through
 * says how many were suppressed.
 */
public final class RateLimitedLog {
    private final Logger log;
    private final long intervalNanos;
    private final ConcurrentHashMap<Integer, long[]> byKey = new ConcurrentHashMap<>();

    public RateLimitedLog(Logger log, long intervalMs) {
        this.log = log;
        this.intervalNanos = intervalMs * 1_000_000L;
    }

    /** Logs {@code message} about {@code key} (e.g. a node id) unless one was logged within the interval. */
    public void warn(int key, String message) {
        long now = System.nanoTime();
        long[] s = byKey.computeIfAbsent(key, k -> new long[] {now - intervalNanos, 0});
        long suppressed;
        synchronized (s) {
            if (now - s[0] < intervalNanos) {
                s[1]++;
                return;
            }
            s[0] = now;
            suppressed = s[1];
            s[1] = 0;
        }
        log.warning(suppressed == 0 ? message : message + " (" + suppressed + " similar warnings suppressed)");
    }
}
