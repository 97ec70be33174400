package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLongArray;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

public class WriteInterestManagerTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    @Test
    public void nodesAreQueuedOnceAndServedInOrder() {
        WriteInterestManager w = new WriteInterestManager();
        w.pushData(5);
        w.pushData(3);
        w.pushData(5);
        w.pushFlowControl(5);
        assertEquals(5, w.next());
        assertEquals(3, w.next());
        assertEquals("queued once while queued", -1, w.next());
        w.pushFlowControl(3);
        assertEquals("queued again once served", 3, w.next());
        assertEquals(-1, w.next());
    }

    /**
     * More ready nodes than the array queue holds: the rest wait in the
     * overflow, every node is served once, in the order it became ready, and
     * a node ready again while others overflow queues behind them.
     */
    @Test
    public void moreReadyNodesThanTheQueueHoldsAreServedInOrder() {
        WriteInterestManager w = new WriteInterestManager();
        int n = WriteInterestManager.QUEUE * 3;
        for (int i = 0; i < n; i++) {
            w.pushData(i);
        }
        for (int i = 0; i < 10; i++) {
            assertEquals(i, w.next());
        }
        w.pushData(0); // ready again: behind the 3 × QUEUE - 10 still waiting
        for (int i = 10; i < n; i++) {
            assertEquals(i, w.next());
        }
        assertEquals(0, w.next());
        assertEquals(-1, w.next());
        assertTrue(w.isEmpty());
    }

    @Test
    public void intQueueIsFifoAndBounded() {
        IntQueue q = new IntQueue(4);
        for (int i = 0; i < 4; i++) {
            assertTrue(q.offer(i));
        }
        assertTrue(!q.offer(9));
        for (int i = 0; i < 4; i++) {
            assertEquals(i, q.poll());
        }
        assertEquals(-1, q.poll());
    }

    /**
     * Stress: 4 threads push data and flow-control interests for 64 nodes; no
     * push is lost: every node is served after its last push of either kind (a
     * push stamps a global clock before checking the flag, a service stamps it
     * after clearing the flag).
     */
    @Test
    public void noInterestIsLostUnderContention() throws Exception {
        WriteInterestManager w = new WriteInterestManager();
        int perThread = 200_000;
        java.util.concurrent.atomic.AtomicLong clock = new java.util.concurrent.atomic.AtomicLong();
        AtomicLongArray lastPush = new AtomicLongArray(64);
        List<Thread> ts = new ArrayList<>();
        AtomicBoolean done = new AtomicBoolean();
        for (int t = 0; t < 4; t++) {
            final int id = t;
            Thread th = new Thread(() -> {
                for (int i = 0; i < perThread; i++) {
                    int node = (i * 31 + id) & 63;
                    lastPush.accumulateAndGet(node, clock.incrementAndGet(), Math::max);
                    if ((i & 1) == 0) {
                        w.pushData(node);
                    } else {
                        w.pushFlowControl(node);
                    }
                }
            });
            ts.add(th);
            th.start();
        }
        long[] lastServe = new long[64];
        Thread consumer = new Thread(() -> {
            while (true) {
                int n = w.next();
                if (n < 0) {
                    if (done.get()) {
                        return;
                    }
                    Thread.yield();
                    continue;
                }
                lastServe[n] = clock.get();
            }
        });
        consumer.start();
        for (Thread th : ts) {
            th.join();
        }
        done.set(true);
        consumer.join(60_000);
        assertTrue("consumer did not finish", !consumer.isAlive());
        for (int n = 0; n < 64; n++) {
            assertTrue("node " + n + " not served after its last push", lastServe[n] >= lastPush.get(n));
        }
    }
}
