package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

public class WaitListTest {
    @Rule
    public final Timeout timeout = Timeout.seconds(120);

    /**
     * Races a signal against waiters that are about to park for 10 s: a lost
     * wake-up would keep a waiter parked (the round would take 10 s). Every
     * round must end within a second.
     */
    @Test
    public void noWakeUpIsLostWhenTheChangeRacesThePark() throws Exception {
        WaitList list = new WaitList();
        AtomicLong state = new AtomicLong();
        AtomicLong acks = new AtomicLong();
        int waiters = 3;
        long rounds = 5_000;
        Thread[] ts = new Thread[waiters];
        AtomicLong slowest = new AtomicLong();
        for (int w = 0; w < waiters; w++) {
            ts[w] = new Thread(() -> {
                for (long round = 1; round <= rounds; round++) {
                    long want = round;
                    long t0 = System.nanoTime();
                    while (state.get() < want) {
                        list.park(TimeUnit.SECONDS.toNanos(10), () -> state.get() >= want);
                    }
                    slowest.accumulateAndGet(System.nanoTime() - t0, Math::max);
                    acks.incrementAndGet();
                }
            });
            ts[w].start();
        }
        java.util.Random random = new java.util.Random(1);
        for (long round = 1; round <= rounds; round++) {
            // Every waiter saw the last round and heads for its next park:
            // after a random moment the change races their register, check, park.
            while (acks.get() < (round - 1) * waiters) {
                Thread.onSpinWait();
            }
            for (int i = random.nextInt(300); i > 0; i--) {
                Thread.onSpinWait();
            }
            state.set(round);
            list.signal();
        }
        for (Thread t : ts) {
            t.join();
        }
        // A lost wake-up costs its waiter the whole 10 s park; a loaded host a few hundred ms at most.
        assertTrue("slowest round " + slowest.get() / 1_000_000 + " ms: a wake-up was lost",
                slowest.get() < TimeUnit.SECONDS.toNanos(5));
        assertEquals(0, list.waiting());
    }

    /**
     * A waiter parked on a full window is woken by the confirmation, not by
     * its park running out. Timing cannot tell those apart on a loaded host
     * (a park lasts 1 ms at most); the window's count of unparks can. A
     * confirmation that lands between two parks finds nobody to unpark, so
     * up to five tries: without the signal none of them counts one.
     */
    @Test
    public void aConfirmationWakesAParkedSenderAtOnce() throws Exception {
        for (int attempt = 1; attempt <= 5; attempt++) {
            FlowWindow w = new FlowWindow(1 << 20, 1 << 10);
            w.acquire(1 << 20, System.nanoTime() + 1_000_000_000L, 1, () -> false);
            long[] waited = new long[1];
            Thread t = new Thread(() -> {
                try {
                    long t0 = System.nanoTime();
                    w.acquire(1 << 10, System.nanoTime() + 20_000_000_000L, 1, () -> false);
                    waited[0] = System.nanoTime() - t0;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            t.start();
            Thread.sleep(300); // long enough for its parks to reach the longest
            io.ibdxnet.TestSupport.waitFor("the sender parks on the window's list", () -> w.waiters().waiting() == 1);
            long before = w.waiters().woken();
            w.confirm(1);
            t.join();
            assertTrue("waited " + waited[0] / 1_000_000 + " ms", waited[0] >= 250_000_000L);
            if (w.waiters().woken() > before) {
                return;
            }
        }
        fail("in five tries the confirmation never unparked the parked sender");
    }
}
