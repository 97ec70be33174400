package io.ibdxnet.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** Serial lanes per source on a pool: order, fairness, the bound. */
public class HandlerDispatchTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private HandlerDispatch d;

    @After
    public void shutdown() {
        if (d != null) {
            d.shutdown();
        }
    }

    private static Runnable await(CountDownLatch l) {
        return () -> {
            try {
                l.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
    }

    /** One thread, a busy source: another source's task runs after one burst, not after the whole backlog. */
    @Test
    public void aBusySourceGivesTheThreadBackAfterABurst() throws Exception {
        d = new HandlerDispatch("test-", 1, 10_000, true);
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger ranOfOne = new AtomicInteger();
        AtomicInteger seenByTwo = new AtomicInteger(-1);
        CountDownLatch done = new CountDownLatch(1);
        d.submit(1, await(release));
        for (int i = 0; i < 1000; i++) {
            d.submit(1, ranOfOne::incrementAndGet);
        }
        d.submit(2, () -> {
            seenByTwo.set(ranOfOne.get());
            done.countDown();
        });
        release.countDown();
        assertTrue(done.await(30, TimeUnit.SECONDS));
        assertEquals("source 1's tasks before source 2's", HandlerDispatch.BURST - 1, seenByTwo.get());
    }

    /** Four threads, three sources: each source's tasks in order and never two at once. */
    @Test
    public void eachSourceRunsSeriallyInOrder() throws Exception {
        d = new HandlerDispatch("test-", 4, 1_000, true);
        int per = 20_000;
        int[] next = new int[3];
        AtomicBoolean[] inside = {new AtomicBoolean(), new AtomicBoolean(), new AtomicBoolean()};
        List<String> problems = new CopyOnWriteArrayList<>();
        CountDownLatch done = new CountDownLatch(3 * per);
        for (int i = 0; i < per; i++) {
            for (int s = 0; s < 3; s++) {
                int src = s;
                int seq = i;
                d.submit(src, () -> {
                    if (!inside[src].compareAndSet(false, true)) {
                        problems.add("source " + src + ": two tasks at once");
                    }
                    if (next[src] != seq) {
                        problems.add("source " + src + ": " + seq + " ran when " + next[src] + " was due");
                    }
                    next[src] = seq + 1;
                    inside[src].set(false);
                    done.countDown();
                });
            }
        }
        assertTrue(done.await(60, TimeUnit.SECONDS));
        assertEquals(List.of(), problems.subList(0, Math.min(3, problems.size())));
    }

    /** At most {@code capacity} tasks wait; the next submit waits until one starts. */
    @Test
    public void submitWaitsWhileCapacityTasksWait() throws Exception {
        d = new HandlerDispatch("test-", 1, 2, true);
        CountDownLatch release = new CountDownLatch(1);
        d.submit(1, await(release));
        long end = System.nanoTime() + 10_000_000_000L;
        while (d.queued() != 0 && System.nanoTime() < end) {
            Thread.sleep(1); // the first task started: it no longer waits
        }
        d.submit(1, () -> {});
        d.submit(2, () -> {});
        assertEquals(2, d.queued());
        CountDownLatch third = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try {
                d.submit(1, () -> {});
                third.countDown();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        t.start();
        assertFalse("a third task was queued beyond the capacity", third.await(200, TimeUnit.MILLISECONDS));
        release.countDown();
        assertTrue(third.await(10, TimeUnit.SECONDS));
        t.join();
    }

    /** A submit waiting for room gives up (false) when the dispatch shuts down. */
    @Test
    public void aWaitingSubmitEndsAtShutdown() throws Exception {
        d = new HandlerDispatch("test-", 1, 1, false);
        CountDownLatch release = new CountDownLatch(1);
        d.submit(1, await(release));
        d.submit(1, () -> {});
        AtomicBoolean result = new AtomicBoolean(true);
        Thread t = new Thread(() -> {
            try {
                result.set(d.submit(1, () -> {}));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        t.start();
        Thread.sleep(50);
        d.shutdown();
        t.join(5_000);
        assertFalse(t.isAlive());
        assertFalse(result.get());
        release.countDown();
    }
}
