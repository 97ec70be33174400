package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesMessage;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;

/**
 * Fairness between sources on every transport (nodes of one JVM; ib on sim):
 * a source whose messages are slow to handle is held back alone, the others
 * keep their rate. (A peer in its own process and network namespace:
 * {@code nio.NeverReadingPeerTest}.)
 */
@RunWith(Parameterized.class)
public class FairnessTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return new Object[] {"ib", "nio", "loopback"};
    }

    @Parameterized.Parameter
    public String transport;

    /** Measuring phases in ms ({@code IBDXNET_FAIRNESS_MS}: longer in {@code ./ibdxnet bench fairness}). */
    public static final long PHASE_MS = Long.parseLong(System.getenv().getOrDefault("IBDXNET_FAIRNESS_MS", "2000"));

    private final List<DXNet> nodes = new ArrayList<>();
    private final List<Senders> streams = new ArrayList<>();

    @After
    public void closeAll() throws InterruptedException {
        for (Senders s : streams) {
            s.close();
        }
        for (DXNet n : nodes) {
            n.close();
        }
    }

    private List<DXNet> start(int count) throws Exception {
        return start(count, c -> {});
    }

    private List<DXNet> start(int count, java.util.function.Consumer<DXNetConfig> tune) throws Exception {
        for (DXNet n : TestSupport.mesh(transport, count, tune, nodes)) {
            n.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        }
        return nodes;
    }

    /**
     * A thread that sends 64-byte messages from {@code from} to node 0 until
     * the test ends: {@code perMs} every millisecond, or flat out (0). Paced
     * by the clock: a burst of {@code perMs}, then a park until the next
     * burst is due; a sender that was kept off the CPU longer catches up, so
     * that its offered rate does not depend on spare CPU (with a park of 1 ms
     * per burst it did: two CI runs, the JDK 25 suite beside, measured 70 and
     * 79 % of the rate before beside the slow source, none of 11 runs here).
     */
    private void stream(DXNet from, int perMs) {
        byte[] payload = new byte[64];
        long t0 = System.nanoTime();
        streams.add(Senders.start("stream-" + from.nodeId(), 1, (id, seq) -> {
            try {
                from.sendMessage(new BytesMessage(0, payload));
            } catch (NetworkException e) {
                // flat out against a slow consumer: the window stayed full for sendTimeoutMs; go on
            }
            if (perMs > 0 && seq % perMs == perMs - 1) {
                long due = t0 + (seq + 1L) / perMs * 1_000_000L;
                for (long ahead = due - System.nanoTime(); ahead > 0; ahead = due - System.nanoTime()) {
                    LockSupport.parkNanos(ahead);
                }
            }
        }));
    }

    private static long sum(AtomicLongArray a, int... indexes) {
        long s = 0;
        for (int i : indexes) {
            s += a.get(i);
        }
        return s;
    }

    /** Windows a phase is measured in: its rate is their median. */
    private static final int WINDOWS = 8;

    /**
     * Messages of nodes 2 and 3 handled at node 0 per second: the median of
     * {@value #WINDOWS} windows over {@code ms}, so that a stall of the whole
     * host in one of them (a CI run saw 70 % once, 98-105 % in 9 runs here,
     * 6 of them beside two busy loops) does not decide; {@code during} runs
     * every 5 ms.
     */
    private static double honestRate(AtomicLongArray handled, long ms, Runnable during) throws InterruptedException {
        double[] rates = new double[WINDOWS];
        for (int w = 0; w < WINDOWS; w++) {
            long before = sum(handled, 2, 3);
            long t0 = System.nanoTime();
            while (System.nanoTime() - t0 < ms * 1_000_000L / WINDOWS) {
                during.run();
                Thread.sleep(5);
            }
            rates[w] = (sum(handled, 2, 3) - before) * 1e9 / (System.nanoTime() - t0);
        }
        java.util.Arrays.sort(rates);
        return (rates[WINDOWS / 2 - 1] + rates[WINDOWS / 2]) / 2;
    }

    /**
     * Node 0 takes 2 ms per message of node 1 (a slow consumer of that source)
     * and nothing for those of nodes 2 and 3, which send to it at a steady 40
     * messages per millisecond each. When node 1 starts sending flat out,
     * nodes 2 and 3 keep at least 80 % of the rate they had before (offered
     * load: on a busy 2-core host their rate does not depend on spare CPU);
     * node 1's messages queued at node 0 stay within the shares. A handler
     * queue of 256 batches, so that node 1 could fill it within the test.
     */
    @Test
    public void aSlowlyHandledSourceLeavesTheOthersTheirRate() throws Exception {
        start(4, c -> c.handlerQueueSize = 256); // the node's batches fill within the test (16 384 take minutes)
        DXNet receiver = nodes.get(0);
        AtomicLongArray handled = new AtomicLongArray(4);
        AtomicLong peakSlowBytes = new AtomicLong();
        receiver.register(BytesMessage.class, m -> {
            handled.incrementAndGet(m.getSource());
            if (m.getSource() == 1) {
                LockSupport.parkNanos(2_000_000);
            }
        });
        stream(nodes.get(2), 40);
        stream(nodes.get(3), 40);
        Thread.sleep(2_000); // warm up
        double alone = honestRate(handled, PHASE_MS, () -> {});
        stream(nodes.get(1), 0);
        Thread.sleep(1_000); // node 1's share at node 0 fills
        double withSlow = honestRate(handled, PHASE_MS,
                () -> peakSlowBytes.accumulateAndGet(receiver.handlerBytesQueued(), Math::max));
        java.util.Map<String, Long> stats = receiver.transportStats();
        String figures = String.format("%s: nodes 2+3 alone %.0f msg/s, beside a slow source %.0f msg/s (%.0f %%); "
                + "node 1 handled %d, handler bytes queued at most %d, spilled %d buffers (%d bytes)", transport, alone,
                withSlow, 100 * withSlow / alone, handled.get(1), peakSlowBytes.get(), stats.get("ibq_spilled_buffers"),
                stats.get("ibq_spilled_bytes"));
        System.out.println("FAIRNESS " + figures);
        assertTrue(figures, withSlow >= 0.8 * alone);
        DXNetConfig defaults = new DXNetConfig(0);
        // Node 1's share, plus one buffer's messages beyond it (64 B + 64 each), plus what nodes 2 and 3 queue.
        assertTrue(figures, peakSlowBytes.get() <= defaults.handlerQueueBytes + 3 * (64L << 10) * 2);
        assertEquals("the receiver is healthy", true, receiver.healthy());
    }

    /**
     * ib keeps a held source's buffers instead of stalling the shared ring:
     * beyond 4 receive buffers they are copied out (their receive buffers go
     * back at once). Every message arrives, in order and intact.
     */
    @Test
    public void ibCopiesOutWhatASourceSendsBeyondItsShareOfReceiveBuffers() throws Exception {
        org.junit.Assume.assumeTrue("ib only: the other transports stop reading the source", transport.equals("ib"));
        start(2, c -> {
            c.ibqMaxBuffersPerSource = 4;
            c.handlerQueueBytesPerSource = 4096;
        });
        DXNet receiver = nodes.get(0);
        int count = 3_000;
        AtomicLong next = new AtomicLong();
        AtomicLong wrong = new AtomicLong();
        java.util.concurrent.CountDownLatch all = new java.util.concurrent.CountDownLatch(count);
        receiver.register(BytesMessage.class, m -> {
            long seq = java.nio.ByteBuffer.wrap(m.bytes).getLong();
            for (int i = 8; i < m.bytes.length; i++) {
                if (m.bytes[i] != (byte) (seq + i)) {
                    wrong.incrementAndGet();
                }
            }
            if (seq != next.getAndIncrement()) {
                wrong.incrementAndGet();
            }
            if (seq % 100 == 0) {
                LockSupport.parkNanos(20_000_000); // slow now and then: the source is held, its buffers pile up
            }
            all.countDown();
        });
        DXNet sender = nodes.get(1);
        for (int s = 0; s < count; s++) {
            byte[] b = new byte[200 + s % 300];
            java.nio.ByteBuffer.wrap(b).putLong(s);
            for (int i = 8; i < b.length; i++) {
                b[i] = (byte) (s + i);
            }
            sender.sendMessage(new BytesMessage(0, b));
        }
        assertTrue("all arrived", all.await(60, java.util.concurrent.TimeUnit.SECONDS));
        java.util.Map<String, Long> stats = receiver.transportStats();
        System.out.println("SPILL ib: " + stats.get("ibq_spilled_buffers") + " buffers, " + stats.get("ibq_spilled_bytes")
                + " bytes copied out");
        assertEquals("in order and intact", 0, wrong.get());
        assertTrue("buffers were copied out: " + stats, stats.get("ibq_spilled_buffers") > 0);
    }
}
