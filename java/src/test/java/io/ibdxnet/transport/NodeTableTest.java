package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** Per-node tables in pages: unwritten slots read as defaults, a page exists only where a value was written. */
public class NodeTableTest {
    @Rule
    public final Timeout timeout = Timeout.seconds(60);

    @Test
    public void readsAndDefaultWritesAllocateNoPage() {
        NodeLongs l = new NodeLongs();
        NodeInts n = new NodeInts();
        NodeRefs<String> r = new NodeRefs<>();
        for (int i = 0; i < NodeId.COUNT; i += 97) {
            assertEquals(0, l.get(i));
            assertEquals(0, n.get(i));
            assertNull(r.get(i));
            l.set(i, 0);
            n.set(i, 0);
            r.set(i, null);
            assertNull(r.getAndSet(i, null));
            assertTrue(n.compareAndSet(i, 0, 0));
            assertFalse(n.compareAndSet(i, 1, 1));
        }
        assertEquals(0, l.pages() + n.pages() + r.pages());
        assertEquals(NodeId.COUNT, l.length());
    }

    @Test
    public void aWriteAllocatesOnlyItsPage() {
        NodeLongs l = new NodeLongs();
        l.set(NodeId.MAX, 7);
        assertEquals(1, l.addAndGet(3, 1));
        assertEquals(2, l.pages());
        assertEquals(7, l.get(NodeId.MAX));
        assertEquals(0, l.get(NodeId.MAX - 1));
        assertEquals(1, l.get(3));
        assertEquals(0, l.get(NodeTable.PAGE + 3));
        NodeRefs<String> r = new NodeRefs<>();
        assertNull(r.compareAndExchange(300, null, "a"));
        assertEquals("a", r.compareAndExchange(300, null, "b"));
        assertTrue(r.compareAndSet(300, "a", "c"));
        assertEquals("c", r.getAndSet(300, null));
        assertEquals(1, r.pages());
    }

    /** Threads racing to create the same page: one page wins, no write is lost. */
    @Test
    public void racingFirstWritesLoseNothing() throws Exception {
        for (int round = 0; round < 200; round++) {
            NodeLongs l = new NodeLongs();
            NodeRefs<Object> r = new NodeRefs<>();
            int threads = 4;
            CyclicBarrier start = new CyclicBarrier(threads);
            Object[] mine = new Object[threads];
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int me = t;
                mine[t] = new Object();
                Thread th = new Thread(() -> {
                    try {
                        start.await();
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                    for (int k = 0; k < 100; k++) {
                        l.addAndGet(1000 + (k & 3), 1);
                    }
                    r.set(1000 + me, mine[me]);
                });
                ts.add(th);
                th.start();
            }
            for (Thread th : ts) {
                th.join();
            }
            assertEquals(400, l.get(1000) + l.get(1001) + l.get(1002) + l.get(1003));
            for (int t = 0; t < threads; t++) {
                assertSame(mine[t], r.get(1000 + t));
            }
            assertEquals(1, l.pages());
            assertEquals(1, r.pages());
        }
    }
}
