package io.ibdxnet.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLongArray;
import org.junit.Test;

public class WriteInterestManagerTest {
    @Test
    public void nodesAreQueuedOnceAndServedInOrder() {
        WriteInterestManager w = new WriteInterestManager();
        int[] c = new int[2];
        w.pushData(5);
        w.pushData(3);
        w.pushData(5);
        w.pushFlowControl(5);
        assertEquals(5, w.next(c));
        assertEquals(2, c[0]);
        assertEquals(1, c[1]);
        assertEquals(3, w.next(c));
        assertEquals(1, c[0]);
        assertEquals(-1, w.next(c));
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

    /** Stress: 4 threads push interests for 64 nodes; the consumer sees every one exactly once. */
    @Test
    public void noInterestIsLostUnderContention() throws Exception {
        WriteInterestManager w = new WriteInterestManager();
        int perThread = 200_000;
        AtomicLongArray pushed = new AtomicLongArray(64);
        List<Thread> ts = new ArrayList<>();
        AtomicBoolean done = new AtomicBoolean();
        for (int t = 0; t < 4; t++) {
            final int id = t;
            Thread th = new Thread(() -> {
                for (int i = 0; i < perThread; i++) {
                    int node = (i * 31 + id) & 63;
                    pushed.incrementAndGet(node);
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
        long[] seen = new long[64];
        int[] c = new int[2];
        long total = 0;
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (total < 4L * perThread) {
            int n = w.next(c);
            if (n < 0) {
                assertTrue("interests lost: " + total, System.nanoTime() < deadline);
                Thread.yield();
                continue;
            }
            seen[n] += c[0] + c[1];
            total += c[0] + c[1];
        }
        for (Thread th : ts) {
            th.join();
        }
        done.set(true);
        assertEquals(-1, w.next(c));
        for (int n = 0; n < 64; n++) {
            assertEquals(pushed.get(n), seen[n]);
        }
    }
}
