package io.ibdxnet.internal;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * {@link DeferredSends} under contention, the way DXNet uses it: producers
 * that send inline while their node's lane is clear (an inline attempt that
 * "finds the ring full" defers instead), defer otherwise, and now and then
 * send synchronously behind what they deferred. What reaches the "wire"
 * (a list in arrival order) must hold every producer's messages in its
 * sending order, to each node.
 */
public class DeferredSendsStressTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    private static final int PRODUCERS = 6;
    private static final int NODES = 3;
    private static final int PER_PRODUCER = 30_000;

    /** payload[0] = producer, payload[1..4] = sequence (per producer and node). */
    private static DeferredMessage message(int node, int producer, int seq) {
        byte[] p = {(byte) producer, (byte) (seq >>> 24), (byte) (seq >>> 16), (byte) (seq >>> 8), (byte) seq};
        return new DeferredMessage(node, (byte) 0, (byte) 0, 0, 0, 0, p, 0);
    }

    private static int seqOf(byte[] p) {
        return (p[1] & 0xff) << 24 | (p[2] & 0xff) << 16 | (p[3] & 0xff) << 8 | (p[4] & 0xff);
    }

    @Test
    public void everyProducersOrderToEachNodeHoldsWithInlineDeferredAndSynchronousSends() throws Exception {
        // The wire: per node, the last sequence seen per producer.
        int[][] last = new int[NODES][PRODUCERS];
        for (int[] l : last) {
            java.util.Arrays.fill(l, -1);
        }
        AtomicReference<String> problem = new AtomicReference<>();
        AtomicInteger arrived = new AtomicInteger();
        AtomicInteger deferredCount = new AtomicInteger();
        Object wire = new Object();
        DeferredSends.Sender toWire = d -> {
            if (ThreadLocalRandom.current().nextInt(64) == 0) {
                LockSupport.parkNanos(50_000); // a slow send now and then: the lanes fill
            }
            synchronized (wire) {
                int producer = d.payload[0];
                int seq = seqOf(d.payload);
                if (seq != last[d.dest][producer] + 1) {
                    problem.compareAndSet(null, "node " + d.dest + ": producer " + producer + " sent " + seq + " after "
                            + last[d.dest][producer]);
                }
                last[d.dest][producer] = seq;
            }
            arrived.incrementAndGet();
        };
        DeferredSends lanes = new DeferredSends(99, Long.MAX_VALUE, toWire, (d, failure) -> {
            if (failure != null) {
                problem.compareAndSet(null, "a deferred send failed: " + failure);
            }
        });
        List<Thread> producers = new ArrayList<>();
        for (int p = 0; p < PRODUCERS; p++) {
            int producer = p;
            Thread t = new Thread(() -> {
                ThreadLocalRandom r = ThreadLocalRandom.current();
                int[] seq = new int[NODES];
                try {
                    for (int i = 0; i < PER_PRODUCER; i++) {
                        int node = r.nextInt(NODES);
                        DeferredMessage m = message(node, producer, seq[node]++);
                        int kind = r.nextInt(100);
                        if (kind < 3) {
                            // synchronous: behind what this thread deferred, then inline
                            lanes.awaitAhead(node, System.nanoTime() + 10_000_000_000L);
                            toWire.send(m);
                        } else if (lanes.clear(node) && kind < 80) {
                            toWire.send(m); // inline: the fast path
                        } else {
                            deferredCount.incrementAndGet();
                            lanes.defer(m); // would wait, or something is ahead
                        }
                    }
                } catch (Exception e) {
                    problem.compareAndSet(null, "producer " + producer + ": " + e);
                }
            });
            producers.add(t);
            t.start();
        }
        for (Thread t : producers) {
            t.join();
        }
        TestSupport.waitFor("every message arrived", 30_000, () -> arrived.get() == PRODUCERS * PER_PRODUCER);
        lanes.shutdown();
        assertNull(problem.get());
        assertEquals(PRODUCERS * PER_PRODUCER, arrived.get());
        assertTrue("nothing was deferred", deferredCount.get() > PRODUCERS * PER_PRODUCER / 10);
        for (int n = 0; n < NODES; n++) {
            for (int p = 0; p < PRODUCERS; p++) {
                assertTrue(last[n][p] > 0);
            }
        }
    }
}
