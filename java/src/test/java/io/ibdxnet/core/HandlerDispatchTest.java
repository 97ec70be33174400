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

    private static HandlerDispatch dispatch(int threads, int capacity, boolean ordered) {
        return new HandlerDispatch("test-", threads, capacity, Long.MAX_VALUE, Long.MAX_VALUE, ordered);
    }

    /**
     * One handler thread: a task of {@code blocker} holds it (over 1 ms) while
     * 1 000 fast tasks of source 1 and then one of source 2 are queued; how
     * many of source 1's ran before source 2's.
     */
    private int fastTasksBeforeTheOtherSource(int blocker) throws Exception {
        d = dispatch(1, 10_000, true);
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger ranOfOne = new AtomicInteger();
        AtomicInteger seenByTwo = new AtomicInteger(-1);
        CountDownLatch done = new CountDownLatch(1);
        CountDownLatch started = new CountDownLatch(1);
        d.submit(blocker, () -> {
            started.countDown();
            await(release).run();
        }, 0);
        assertTrue(started.await(10, TimeUnit.SECONDS));
        for (int i = 0; i < 1000; i++) {
            d.submit(1, ranOfOne::incrementAndGet, 0);
        }
        d.submit(2, () -> {
            seenByTwo.set(ranOfOne.get());
            done.countDown();
        }, 0);
        Thread.sleep(5); // the blocking task runs longer than SLOW_TASK_NANOS
        release.countDown();
        assertTrue(done.await(30, TimeUnit.SECONDS));
        return seenByTwo.get();
    }

    /**
     * A busy source: another source's task runs after one burst of it, not
     * after the whole backlog. A fast task preempted for over 1 ms counts as
     * slow and ends the burst early (seen in CI: 45), so up to three tries:
     * never more than a burst, and exactly one in some try.
     */
    @Test
    public void aBusySourceGivesTheThreadBackAfterABurst() throws Exception {
        List<Integer> seen = new java.util.ArrayList<>();
        for (int attempt = 0; attempt < 3 && !seen.contains(HandlerDispatch.BURST); attempt++) {
            int n = fastTasksBeforeTheOtherSource(3);
            seen.add(n);
            d.shutdown();
            d = null;
            assertTrue("source 1's tasks before source 2's, per try: " + seen, n >= 1 && n <= HandlerDispatch.BURST);
        }
        assertTrue("one try ran exactly a burst of source 1 first: " + seen, seen.contains(HandlerDispatch.BURST));
    }

    /** A source whose task ran long goes to the back at once (round-robin), not after a burst. */
    @Test
    public void aSlowTaskSendsItsSourceToTheBack() throws Exception {
        assertEquals("source 1's fast tasks before source 2's", 0, fastTasksBeforeTheOtherSource(1));
    }

    /**
     * Shares in bytes: a source over its own share has no room while another
     * has; a wanting source hears once its own task finished; a source with
     * nothing queued always has room, even when the node's bytes are used up.
     */
    @Test
    public void aSourceOverItsShareHasNoRoomAndHearsWhenItHasAgain() throws Exception {
        d = new HandlerDispatch("test-", 2, 1_000, 3_000, 1_000, true);
        List<Integer> told = new CopyOnWriteArrayList<>();
        d.onRoom(told::add);
        CountDownLatch release = new CountDownLatch(1);
        d.submit(1, await(release), 600);
        assertTrue("600 of 1000 bytes used", d.hasRoom(1));
        d.submit(1, () -> {}, 600);
        assertFalse("1200 of 1000 bytes used", d.hasRoom(1));
        assertTrue("another source is not held back", d.hasRoom(2));
        d.want(1);
        assertEquals(List.of(), told);
        d.submit(2, await(release), 2_000); // the node: 3200 of 3000
        assertFalse("the node's bytes are used up", d.hasRoom(2));
        assertTrue("a source with nothing queued has its guaranteed minimum", d.hasRoom(3));
        release.countDown();
        assertTrue(d.awaitIdle(10_000));
        assertEquals("told once, of source 1", List.of(1), told);
        assertTrue(d.hasRoom(1));
        assertEquals(0, d.queuedBytes());
    }

    /** Four threads, three sources: each source's tasks in order and never two at once. */
    @Test
    public void eachSourceRunsSeriallyInOrder() throws Exception {
        d = dispatch(4, 1_000, true);
        int per = 20_000;
        int[] next = new int[3];
        AtomicBoolean[] inside = {new AtomicBoolean(), new AtomicBoolean(), new AtomicBoolean()};
        List<String> problems = new CopyOnWriteArrayList<>();
        CountDownLatch done = new CountDownLatch(3 * per);
        for (int i = 0; i < per; i++) {
            for (int s = 0; s < 3; s++) {
                int src = s;
                int seq = i;
                d.submitWhenRoom(src, () -> {
                    if (!inside[src].compareAndSet(false, true)) {
                        problems.add("source " + src + ": two tasks at once");
                    }
                    if (next[src] != seq) {
                        problems.add("source " + src + ": " + seq + " ran when " + next[src] + " was due");
                    }
                    next[src] = seq + 1;
                    inside[src].set(false);
                    done.countDown();
                }, 0);
            }
        }
        assertTrue(done.await(60, TimeUnit.SECONDS));
        assertEquals(List.of(), problems.subList(0, Math.min(3, problems.size())));
    }

    /**
     * At most {@code capacity} tasks are unfinished: a source that has one
     * waits for room while a source with none may still queue one (its
     * guaranteed minimum).
     */
    @Test
    public void submitWhenRoomWaitsWhileCapacityTasksAreUnfinished() throws Exception {
        d = dispatch(1, 2, true);
        CountDownLatch release = new CountDownLatch(1);
        d.submit(1, await(release), 0);
        d.submit(1, () -> {}, 0);
        assertEquals(2, d.queued());
        assertTrue(d.submitWhenRoom(2, () -> {}, 0));
        assertEquals(3, d.queued());
        CountDownLatch third = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try {
                d.submitWhenRoom(1, () -> {}, 0);
                third.countDown();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        t.start();
        assertFalse("a third task of source 1 was queued beyond the capacity", third.await(200, TimeUnit.MILLISECONDS));
        release.countDown();
        assertTrue(third.await(10, TimeUnit.SECONDS));
        t.join();
    }

    /** A submit waiting for room gives up (false) when the dispatch shuts down. */
    @Test
    public void aWaitingSubmitEndsAtShutdown() throws Exception {
        d = dispatch(1, 1, false);
        CountDownLatch release = new CountDownLatch(1);
        d.submit(1, await(release), 0);
        d.submit(1, () -> {}, 0);
        AtomicBoolean result = new AtomicBoolean(true);
        Thread t = new Thread(() -> {
            try {
                result.set(d.submitWhenRoom(1, () -> {}, 0));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        t.start();
        io.ibdxnet.TestSupport.awaitWaiting(t);
        d.shutdown();
        t.join(5_000);
        assertFalse(t.isAlive());
        assertFalse(result.get());
        release.countDown();
    }
}
