package io.ibdxnet.core;

import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * Log lines about one peer at most once per interval and kind: a hostile or
 * broken peer must not be able to flood the log. A line is limited per
 * (kind, node), so one kind of trouble does not hide another; the next line
 * of a (kind, node) that gets through says how many were suppressed since
 * the last one. A {@link Throwable} goes only on a line that gets through:
 * with its stack trace ({@link #log}), or, for a failure a peer caused (its
 * payload, its connection), only as its {@code toString} ({@link #caused}).
 * The entries are bounded by the kinds (constants of the code) times the
 * node ids (65 535), a line by {@link #MAX_CHARS}.
 */
public final class RateLimitedLog {
    /**
     * Longest message logged, in characters; the rest is cut and counted (an
     * exception's text may quote what a peer sent, up to a whole message).
     */
    public static final int MAX_CHARS = 2_000;
    private final Logger log;
    private final long intervalNanos;
    private final LongSupplier clock;
    private final ConcurrentHashMap<Key, long[]> byKey = new ConcurrentHashMap<>();

    public RateLimitedLog(Logger log, long intervalMs) {
        this(log, intervalMs, System::nanoTime);
    }

    /** With its own clock (nanoseconds; tests). */
    public RateLimitedLog(Logger log, long intervalMs, LongSupplier clock) {
        this.log = log;
        this.intervalNanos = intervalMs * 1_000_000L;
        this.clock = clock;
    }

    /** A warning about {@code key} (e.g. a node id), limited with every other warning of this call about that key. */
    public void warn(int key, String message) {
        log(Level.WARNING, "", key, message, null);
    }

    /** A warning of {@code kind} about {@code node}. */
    public void warn(String kind, int node, String message) {
        log(Level.WARNING, kind, node, message, null);
    }

    /**
     * A line of {@code kind} about {@code node} at {@code level}, with
     * {@code thrown}'s stack trace (null: none) if it gets through. Returns
     * whether it got through.
     */
    public boolean log(Level level, String kind, int node, String message, Throwable thrown) {
        if (!log.isLoggable(level)) {
            return false;
        }
        long suppressed = admit(kind, node);
        if (suppressed < 0) {
            return false;
        }
        String text = message.length() <= MAX_CHARS ? message
                : message.substring(0, MAX_CHARS) + "… (" + (message.length() - MAX_CHARS) + " more characters)";
        LogRecord r = new LogRecord(level, suppressed == 0 ? text : text + " (" + suppressed + " similar "
                + (level.intValue() >= Level.SEVERE.intValue() ? "errors" : "warnings") + " suppressed)");
        r.setLoggerName(log.getName());
        r.setThrown(thrown);
        log.log(r);
        return true;
    }

    /**
     * A failure {@code node} caused (a lying payload, a broken connection):
     * as {@link #log}, with only {@code cause}'s {@code toString} appended,
     * never its stack trace.
     */
    public boolean caused(Level level, String kind, int node, String message, Throwable cause) {
        return log(level, kind, node, cause == null ? message : message + ": " + cause, null);
    }

    /** The lines suppressed so far if this one may pass now, else -1 (counted). */
    private long admit(String kind, int node) {
        long now = clock.getAsLong();
        long[] s = byKey.computeIfAbsent(new Key(kind, node), k -> new long[] {now - intervalNanos, 0});
        synchronized (s) {
            if (now - s[0] < intervalNanos) {
                s[1]++;
                return -1;
            }
            s[0] = now;
            long suppressed = s[1];
            s[1] = 0;
            return suppressed;
        }
    }

    private static final class Key {
        final String kind;
        final int node;

        Key(String kind, int node) {
            this.kind = kind;
            this.node = node;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Key && ((Key) o).node == node && ((Key) o).kind.equals(kind);
        }

        @Override
        public int hashCode() {
            return Objects.hash(kind, node);
        }
    }
}
