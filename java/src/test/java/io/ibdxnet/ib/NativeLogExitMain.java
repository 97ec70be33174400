package io.ibdxnet.ib;

import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * Child JVM of {@link NativeLogTest}: an engine floods the native log (a
 * statistics print every millisecond, from a thread the JVM does not know)
 * into a slow handler until the queue overflows, then the JVM exits with the
 * engine still running and the drain thread inside the handler.
 */
public final class NativeLogExitMain {
    private NativeLogExitMain() {}

    /** Counts and slows down what reaches a logger. */
    private static final class Slow extends Handler {
        final AtomicInteger seen = new AtomicInteger();
        volatile String dropped;

        @Override
        public void publish(LogRecord r) {
            seen.incrementAndGet();
            if (r.getMessage().contains("records dropped")) {
                dropped = r.getLoggerName() + " " + r.getLevel() + " " + r.getMessage();
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
    }

    public static void main(String[] args) throws Exception {
        Logger stats = Logger.getLogger("ibdxnet.stats");
        Logger bridge = Logger.getLogger("ibdxnet.jni.logbridge");
        Slow slow = new Slow();
        stats.addHandler(slow);
        bridge.addHandler(slow);
        boolean toJava = NativeLog.toSystemLogger();
        System.out.println("toSystemLogger=" + toJava);
        Map<String, String> c = StreamCallbacks.simConfig(0);
        c.put("stats_print_interval_ms", "1");
        NativeEngine e = NativeEngine.start(c, new StreamCallbacks(0, 0));
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        if (toJava) {
            while (slow.dropped == null && System.nanoTime() < end) {
                Thread.sleep(10);
            }
        } else {
            Thread.sleep(500);
        }
        System.out.println("engine port " + e.localPort() + ", records seen " + slow.seen.get());
        System.out.println("dropped: " + slow.dropped);
        System.out.flush();
        System.exit(0);
    }
}
