package io.ibdxnet.ib;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.TestSupport;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The engine handle is leased by every native call: natives racing
 * {@code destroy} (the raw handle, as a thread that read it before
 * {@link NativeEngine#close} would use it) either complete or get
 * {@link EngineClosedException}; never a crash, never another failure.
 */
public class EngineLeaseTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final int ROUNDS = 40;
    private static final int THREADS = 4;
    private static final int RETURN_BUFFER_UNKNOWN = (int) NativeLayout.constant("RETURN_BUFFER_UNKNOWN");

    /** One native call on {@code h}, chosen by {@code i}; checks what a live engine answers. */
    private static void call(long h, int i) {
        switch (i & 3) {
            case 0:
                assertEquals(RETURN_BUFFER_UNKNOWN, IbdxnetNative.returnBuffer(h, 0x7fff_fff0));
                break;
            case 1:
                assertTrue(IbdxnetNative.stats(h).contains("running="));
                break;
            case 2:
                assertTrue(!IbdxnetNative.connectionOpen(h, 0x7fff_fff0));
                break;
            default:
                assertTrue(IbdxnetNative.localPort(h) > 0);
                break;
        }
    }

    @Test
    public void nativesRacingDestroyGetTheCleanExceptionNeverACrash() throws Exception {
        long completed = 0;
        long refused = 0;
        for (int round = 0; round < ROUNDS; round++) {
            long h = IbdxnetNative.create(text(StreamCallbacks.simConfig(0)), new StreamCallbacks(0, 0), NativeEngine.checkEveryUpcall());
            assertTrue(h != 0);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicLong ok = new AtomicLong();
            AtomicLong closedSeen = new AtomicLong();
            CountDownLatch running = new CountDownLatch(THREADS);
            CountDownLatch destroyed = new CountDownLatch(1);
            Thread[] hammers = new Thread[THREADS];
            for (int t = 0; t < THREADS; t++) {
                final int seed = t;
                hammers[t] = new Thread(() -> {
                    running.countDown();
                    int i = seed;
                    boolean sawClosed = false;
                    try {
                        // Call until destroy returned, then once more: that call must be refused.
                        while (true) {
                            boolean after = destroyed.getCount() == 0;
                            try {
                                call(h, i++);
                                if (after) {
                                    throw new AssertionError("a call after destroy returned succeeded");
                                }
                                ok.incrementAndGet();
                            } catch (EngineClosedException e) {
                                sawClosed = true;
                                closedSeen.incrementAndGet();
                                if (after) {
                                    break;
                                }
                            }
                        }
                        if (!sawClosed) {
                            throw new AssertionError("no call was refused");
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }, "lease-hammer-" + t);
                hammers[t].start();
            }
            running.await();
            Thread.sleep(round % 5); // close at different points of the calls
            Thread closer = new Thread(() -> IbdxnetNative.destroy(h), "lease-closer");
            closer.start();
            closer.join();
            destroyed.countDown();
            for (Thread t : hammers) {
                t.join();
            }
            // A second destroy of the same handle does nothing.
            IbdxnetNative.destroy(h);
            assertNull("round " + round + ": " + failure.get(), failure.get());
            assertTrue(closedSeen.get() >= THREADS);
            completed += ok.get();
            refused += closedSeen.get();
        }
        // Calls did overlap the engine's life, not only its end.
        assertTrue("calls completed " + completed, completed > 0);
        assertTrue("calls refused " + refused, refused >= (long) ROUNDS * THREADS);
    }

    @Test
    public void everyLeasedNativeRefusesAClosedHandle() throws Exception {
        long h = IbdxnetNative.create(text(StreamCallbacks.simConfig(0)), new StreamCallbacks(0, 0), NativeEngine.checkEveryUpcall());
        IbdxnetNative.destroy(h);
        Runnable[] calls = {
            () -> IbdxnetNative.localPort(h),
            () -> IbdxnetNative.fabricName(h),
            () -> IbdxnetNative.addNode(h, 1, "127.0.0.1", 5731),
            () -> IbdxnetNative.removeNode(h, 1),
            () -> {
                try {
                    IbdxnetNative.connect(h, 1, 10);
                } catch (IbException e) {
                    throw new AssertionError(e);
                }
            },
            () -> IbdxnetNative.ringSize(h),
            () -> IbdxnetNative.wakeSendThread(h),
            () -> IbdxnetNative.sendFromCaller(h, 64),
            () -> IbdxnetNative.closeConnection(h, 1, true),
            () -> IbdxnetNative.closeQueuePair(h, 1, 1),
            () -> IbdxnetNative.setHandledOnLeave(h, 1, 1, 0),
            () -> IbdxnetNative.releaseConnection(h, 1),
            () -> IbdxnetNative.connectionOpen(h, 1),
            () -> IbdxnetNative.peerFlowUnit(h, 1, 1),
            () -> IbdxnetNative.returnBuffer(h, 1),
            () -> IbdxnetNative.stats(h),
        };
        // Not leased: the send thread's sleep word outlives the engine (the handle's slot keeps it),
        // so Java's read of it racing a close loads live memory; it says the thread is not waiting.
        long word = IbdxnetNative.sendSleepWord(h) + NativeLayout.of("IbdxnetSleepWord").offset("sleeping", 4);
        int sleeping = io.ibdxnet.memory.Memory.getIntVolatile(word);
        assertTrue("sleep word " + sleeping, sleeping == 0 || sleeping == 1);
        for (int i = 0; i < calls.length; i++) {
            try {
                calls[i].run();
                fail("native " + i + " ran on a destroyed engine");
            } catch (EngineClosedException expected) {
                assertEquals("engine is closed", expected.getMessage());
            }
        }
    }

    private static String text(java.util.Map<String, String> config) {
        StringBuilder b = new StringBuilder();
        for (java.util.Map.Entry<String, String> e : config.entrySet()) {
            b.append(e.getKey()).append('=').append(e.getValue()).append('\n');
        }
        return b.toString();
    }
}
