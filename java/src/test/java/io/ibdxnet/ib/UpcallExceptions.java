package io.ibdxnet.ib;

import static org.junit.Assert.assertEquals;

import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Two engines stream to each other while both up-calls of one side throw for
 * their first {@link #THROWS} calls, a {@link RuntimeException} and an
 * {@link Error} in turn: each is counted, the engine keeps running, and the next
 * up-calls work (the stream arrives whole). Run in the test JVM ({@code
 * -Xcheck:jni}: every up-call is checked) and, through {@link #main}, in a
 * child JVM without it (only an up-call that returned 0 is checked).
 */
final class UpcallExceptions implements EngineCallbacks {
    static final int THROWS = 4;

    private final StreamCallbacks inner;
    final AtomicInteger sendCalls = new AtomicInteger();
    final AtomicInteger receiveCalls = new AtomicInteger();

    private UpcallExceptions(StreamCallbacks inner) {
        this.inner = inner;
    }

    private static void maybeThrow(int call, String where) {
        if (call <= THROWS) {
            if (call % 2 == 0) {
                throw new Error("test: an Error in " + where);
            }
            throw new IllegalStateException("test: a RuntimeException in " + where);
        }
    }

    @Override
    public int nextDataToSend(long prev, long completed, long next) {
        // After the real work: the package it wrote is dropped and offered again.
        int r = inner.nextDataToSend(prev, completed, next);
        maybeThrow(sendCalls.incrementAndGet(), "nextDataToSend");
        return r;
    }

    @Override
    public int received(long ring) {
        // Before the real work: the entries stay in the ring for the next call.
        maybeThrow(receiveCalls.incrementAndGet(), "received");
        return inner.received(ring);
    }

    @Override
    public void nodeEvent(int kind, int nodeId, long value) {
        inner.nodeEvent(kind, nodeId, value);
    }

    private static Map<String, String> config(int node) {
        return StreamCallbacks.simConfig(node);
    }

    /** The scenario; returns the throwing engine's statistics at the end. */
    static Map<String, Long> run() throws Exception {
        long limit = 2 << 20;
        StreamCallbacks a = new StreamCallbacks(0, limit);
        StreamCallbacks b = new StreamCallbacks(1, limit);
        UpcallExceptions throwing = new UpcallExceptions(a);
        try (NativeEngine ea = NativeEngine.start(config(0), throwing);
                NativeEngine eb = NativeEngine.start(config(1), b)) {
            StreamCallbacks.streamBothWays(ea, a, eb, b, limit);
            Map<String, Long> s = ea.stats();
            assertEquals("every throw counted, nothing else", Long.valueOf(2 * THROWS), s.get("upcall_exceptions"));
            assertEquals(Long.valueOf(1), s.get("running"));
            assertEquals(Long.valueOf(0), eb.stats().get("upcall_exceptions"));
            // Past the throws, both up-calls kept being made.
            if (throwing.sendCalls.get() <= THROWS || throwing.receiveCalls.get() <= THROWS) {
                throw new AssertionError("up-calls stopped after the exceptions");
            }
            return s;
        }
    }

    /** In a child JVM: prints the line the test looks for. */
    public static void main(String[] args) throws Exception {
        Map<String, Long> s = run();
        System.out.println("upcall-exceptions-ok exceptions=" + s.get("upcall_exceptions")
                + " check_every=" + s.get("upcall_check_every"));
        System.exit(0); // the engines' daemon threads are gone; no JUnit here
    }
}
