package io.ibdxnet;

import static org.junit.Assert.fail;

import io.ibdxnet.internal.Transports;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.rules.Timeout;

/** What the tests share: waiting for a condition, the per-class timeout, longs carried as bytes, small sim nodes. */
public final class TestSupport {
    private TestSupport() {}

    /** Polls {@code condition} every 2 ms; fails naming {@code what} after 60 s. */
    public static void waitFor(String what, BooleanSupplier condition) throws InterruptedException {
        waitFor(what, 60_000, condition);
    }

    /** Polls {@code condition} every 2 ms; fails naming {@code what} after {@code timeoutMs}. */
    public static void waitFor(String what, long timeoutMs, BooleanSupplier condition) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > end) {
                fail("timed out after " + timeoutMs + " ms waiting for " + what);
            }
            Thread.sleep(2);
        }
    }

    /**
     * Checks {@code condition} every 2 ms for {@code ms}: for "nothing more
     * arrives" after a test saw what it waited for. Fails at the first check
     * that does not hold.
     */
    public static void assertHoldsFor(String what, long ms, BooleanSupplier condition) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        do {
            if (!condition.getAsBoolean()) {
                fail("no longer true: " + what);
            }
            Thread.sleep(2);
        } while (System.nanoTime() < end);
    }

    /** Waits up to 10 s until {@code t} blocks, waits or parks (it reached the wait a test wants it in). */
    public static void awaitWaiting(Thread t) throws InterruptedException {
        waitFor(t.getName() + " waiting", 10_000, () -> {
            Thread.State s = t.getState();
            return s == Thread.State.WAITING || s == Thread.State.TIMED_WAITING || s == Thread.State.BLOCKED;
        });
    }

    /**
     * Waits up to 10 s until no thread of a node ({@code dxnet-*}, {@code ibdxnet-*})
     * is alive; fails naming those left. The library's native-log drain
     * (one per JVM, README "The native log") is not a node's.
     */
    public static void awaitNodeThreadsGone() throws InterruptedException {
        List<Thread> left = new ArrayList<>();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        do {
            left.clear();
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                String n = t.getName();
                if ((n.startsWith("dxnet-") || n.startsWith("ibdxnet-")) && !n.equals("ibdxnet-native-log") && t.isAlive()) {
                    left.add(t);
                }
            }
            if (left.isEmpty()) {
                return;
            }
            Thread.sleep(5);
        } while (System.nanoTime() < end);
        StringBuilder stacks = new StringBuilder();
        for (Thread t : left) {
            stacks.append("\n\"").append(t.getName()).append("\" ").append(t.getState());
            for (StackTraceElement e : t.getStackTrace()) {
                stacks.append("\n    at ").append(e);
            }
        }
        fail("threads left 10 s after close:" + stacks);
    }

    /** Every thread's name, state and stack (for a test that found a stall). */
    public static String threadDump() {
        StringBuilder out = new StringBuilder();
        for (java.lang.management.ThreadInfo t : java.lang.management.ManagementFactory.getThreadMXBean().dumpAllThreads(false,
                false)) {
            out.append('"').append(t.getThreadName()).append("\" ").append(t.getThreadState()).append('\n');
            for (StackTraceElement e : t.getStackTrace()) {
                out.append("    at ").append(e).append('\n');
            }
        }
        return out.toString();
    }

    /**
     * Each test of a class gets at most {@code minutes}: a hung join fails the
     * test (with the stuck thread's stack) instead of hanging CI.
     */
    public static Timeout minutes(int minutes) {
        return Timeout.builder().withTimeout(minutes, TimeUnit.MINUTES).withLookingForStuckThread(true).build();
    }

    /** {@code values} as the bytes of an {@link io.ibdxnet.app.BytesRequest} (big-endian). */
    public static byte[] bytesOf(long... values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * Long.BYTES);
        b.asLongBuffer().put(values);
        return b.array();
    }

    /** The longs {@link #bytesOf} wrote. */
    public static long[] longsOf(byte[] bytes) {
        long[] v = new long[bytes.length / Long.BYTES];
        ByteBuffer.wrap(bytes).asLongBuffer().get(v);
        return v;
    }

    /** A bare NIO transport's settings from {@code c}, as DXNet would make them. */
    public static io.ibdxnet.nio.NioSettings nioSettings(DXNetConfig c) {
        return Transports.nioSettings(c);
    }

    /** Node {@code id} of a {@link #mesh}: a small sim engine on 127.0.0.1, then {@code tune}. */
    private static DXNetConfig meshConfig(String transport, int id, java.util.function.Consumer<DXNetConfig> tune) {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = transport;
        c.listen = "127.0.0.1:0";
        smallSimNode(c);
        tune.accept(c);
        return c;
    }

    /** Small engines on sim for tests: rings, queues and window sized for many nodes on 2 cores. */
    public static void smallSimNode(DXNetConfig c) {
        // Nodes share 2 cores: idle engine threads must yield at once, or their
        // busy polling starves the Java threads (10 ms round trips instead of 0.4 ms).
        c.nativeConfig.put("parking_yield_after_ms", System.getProperty("test.yieldAfterMs", "0"));
        c.nativeConfig.put("fabric", "sim");
        c.nativeConfig.put("listen", "127.0.0.1:0");
        c.nativeConfig.put("send_ring_size", Integer.toString(256 << 10));
        c.nativeConfig.put("srq_size", "128");
        c.nativeConfig.put("recv_buffer_count", "1024");
        c.flowControlWindow = 1 << 20;
    }

    /**
     * {@code count} nodes 0… over {@code transport} on 127.0.0.1 that know each
     * other: defaults (small sim engines) except what {@code tune} sets. Each is
     * added to {@code started} as soon as it runs (for the caller's cleanup).
     */
    public static java.util.List<DXNet> mesh(String transport, int count, java.util.function.Consumer<DXNetConfig> tune,
            java.util.List<DXNet> started) throws Exception {
        java.util.List<DXNet> out = new java.util.ArrayList<>();
        for (int i = 0; i < count; i++) {
            DXNetConfig c = meshConfig(transport, i, tune);
            DXNet n = DXNet.start(c);
            started.add(n);
            out.add(n);
        }
        for (DXNet a : out) {
            for (DXNet b : out) {
                if (a != b) {
                    a.addNode(b.nodeId(), "127.0.0.1:" + b.localPort());
                }
            }
        }
        return out;
    }

    /**
     * {@link #mesh}, each node started with {@link DXNet#start(DXNetConfig, java.util.function.Consumer)}:
     * in node i's {@code beforeReceiving} it and the nodes started before it
     * learn each other's addresses, then {@code beforeReceiving.accept(i, node)}
     * runs (the earlier nodes are in {@code started}, node i is not yet).
     */
    public static java.util.List<DXNet> mesh(String transport, int count, java.util.function.Consumer<DXNetConfig> tune,
            java.util.List<DXNet> started, java.util.function.BiConsumer<Integer, DXNet> beforeReceiving) throws Exception {
        java.util.List<DXNet> out = new java.util.ArrayList<>();
        for (int i = 0; i < count; i++) {
            DXNetConfig c = meshConfig(transport, i, tune);
            int id = i;
            DXNet n = DXNet.start(c, node -> {
                for (DXNet a : out) {
                    a.addNode(id, "127.0.0.1:" + node.localPort());
                    node.addNode(a.nodeId(), "127.0.0.1:" + a.localPort());
                }
                beforeReceiving.accept(id, node);
            });
            started.add(n);
            out.add(n);
        }
        return out;
    }
}
