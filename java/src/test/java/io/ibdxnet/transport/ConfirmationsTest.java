package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * {@link Confirmations} is called by several threads at once for one node
 * (handler threads confirm what they handled, the coordinator what carried no
 * message for a handler): every unit is owed exactly once, never before its
 * bytes were counted. Counting the bytes in and the units off in two steps
 * let two callers take off the same unit (the residue went negative, the
 * sender was credited ahead of what was handled).
 */
public class ConfirmationsTest {
    @Rule
    public final Timeout timeout = Timeout.seconds(120);

    private static final int THREADS = 4;
    private static final int CALLS = 200_000;
    private static final int BYTES = 100;
    private static final long UNIT = 1000;

    @Test
    public void concurrentCallersOweEachUnitOnce() throws Exception {
        Confirmations c = new Confirmations(UNIT);
        int node = 3;
        AtomicLong taken = new AtomicLong();
        AtomicLong added = new AtomicLong();
        AtomicLong overCredited = new AtomicLong();
        AtomicLong negative = new AtomicLong();
        CyclicBarrier start = new CyclicBarrier(THREADS);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            Thread th = new Thread(() -> {
                try {
                    start.await();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
                for (int i = 0; i < CALLS; i++) {
                    added.addAndGet(BYTES); // before: what is taken may never exceed it
                    if (c.consumed(node, BYTES)) {
                        long sum = taken.addAndGet(c.take(node));
                        if (sum * UNIT > added.get()) {
                            overCredited.incrementAndGet();
                        }
                    }
                    if (c.residue(node) < 0) {
                        negative.incrementAndGet();
                    }
                }
            });
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join();
        }
        assertEquals("units taken beyond the bytes counted so far", 0, overCredited.get());
        assertEquals("bytes below one unit seen negative", 0, negative.get());
        long total = (long) THREADS * CALLS * BYTES;
        assertEquals("units owed", total / UNIT, taken.get() + c.owed(node, Integer.MAX_VALUE));
        assertEquals("bytes below one unit", total % UNIT, c.residue(node));
    }

    @Test
    public void takeTakesEachOwedUnitOnce() {
        Confirmations c = new Confirmations(UNIT);
        c.consumed(1, (int) (3 * UNIT + 5));
        assertEquals(3, c.take(1));
        assertEquals(0, c.take(1));
        assertEquals(5, c.residue(1));
    }
}
