package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.NetworkException;
import io.ibdxnet.TestSupport;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The sends that never wait ({@link RingConnection#tryWrite},
 * {@link RingConnection#tryReserve}: {@link FlowWindow#tryAcquire} and
 * {@link OutgoingRingBuffer#tryReserve}, lock-free) among waiting ones, and
 * the window a failed reservation gives back.
 */
public class RingConnectionTryTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    private static final long FOREVER = System.nanoTime() + 3_600_000_000_000L;

    private static int readLength(long mem, long pos, int capacity) {
        int v = 0;
        for (int i = 0; i < 4; i++) {
            v = v << 8 | (Memory.getByte(mem + ((pos + i) & (capacity - 1))) & 0xFF);
        }
        return v;
    }

    /**
     * Producers that try (and retry after a false), reserve in place, or wait,
     * against a consumer that confirms ring and window: every record arrives
     * whole and in each producer's order, the window is never overrun, and
     * nothing stays counted in it at the end (a false gave back what it took).
     */
    @Test
    public void tryingProducersAmongWaitingOnesNeitherOverrunTheWindowNorLeakIt() throws Exception {
        int capacity = 1 << 12;
        long window = 2048;
        long mem = NativeBlocks.allocate(capacity);
        Memory.fill(mem, capacity, (byte) 0);
        OutgoingRingBuffer orb = new OutgoingRingBuffer(mem, capacity);
        FlowWindow flow = new FlowWindow(window, 1);
        RingConnection c = new RingConnection(1, orb, flow);
        int producers = 4;
        int perProducer = 40_000;
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong falses = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        for (int p = 0; p < producers; p++) {
            final int id = p;
            Thread t = new Thread(() -> {
                RingRecord record = new RingRecord();
                try {
                    for (int seq = 0; seq < perProducer; seq++) {
                        int len = 9 + (seq * 7 + id) % 50;
                        byte[] rec = new byte[len];
                        rec[4] = (byte) id;
                        rec[5] = (byte) seq;
                        rec[6] = (byte) (seq >>> 8);
                        rec[7] = (byte) (seq >>> 16);
                        byte[] header = java.util.Arrays.copyOf(rec, 8);
                        int mode = (seq + id) % 3;
                        if (mode == 0) {
                            while (!c.tryWrite(header, rec, 8, len - 8)) {
                                falses.incrementAndGet();
                                Thread.yield();
                            }
                        } else if (mode == 1) {
                            while (!c.tryReserve(len, record)) {
                                falses.incrementAndGet();
                                Thread.yield();
                            }
                            orb.write(record.start() + 4, rec, 4, len - 4);
                            c.publish(record);
                        } else {
                            assertTrue(c.write(header, rec, 8, len - 8, FOREVER, false));
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            threads.add(t);
            t.start();
        }
        int[] next = new int[producers];
        long read = 0;
        long expected = 0;
        for (int p = 0; p < producers; p++) {
            for (int seq = 0; seq < perProducer; seq++) {
                expected += OutgoingRingBuffer.aligned(9 + (seq * 7 + p) % 50);
            }
        }
        long maxUnconfirmed = 0;
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (read < expected) {
            maxUnconfirmed = Math.max(maxUnconfirmed, flow.unconfirmed());
            long ready = orb.readyToPost();
            if (ready == 0) {
                assertTrue("stalled at " + read + " failure " + failure.get(), System.nanoTime() < deadline && failure.get() == null);
                Thread.yield();
                continue;
            }
            orb.posted(ready);
            long end = read + ready;
            while (read < end) {
                int len = readLength(mem, read, capacity);
                int id = Memory.getByte(mem + ((read + 4) & (capacity - 1)));
                int seq = (Memory.getByte(mem + ((read + 5) & (capacity - 1))) & 0xFF)
                        | (Memory.getByte(mem + ((read + 6) & (capacity - 1))) & 0xFF) << 8
                        | (Memory.getByte(mem + ((read + 7) & (capacity - 1))) & 0xFF) << 16;
                assertEquals("producer " + id + " order", next[id], seq);
                assertEquals(9 + (seq * 7 + id) % 50, len);
                next[id]++;
                read += OutgoingRingBuffer.aligned(len);
            }
            orb.confirmed(ready);
            flow.confirm((int) ready); // unit 1: confirmed byte for byte
        }
        for (Thread t : threads) {
            t.join();
        }
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
        System.out.println("falses (would have waited): " + falses.get() + ", most unconfirmed: " + maxUnconfirmed);
        assertTrue("the window never filled: no try said false", falses.get() > 0);
        // A racing getAndAdd that does not fit is taken back at once: a sample may see it, never more.
        assertTrue("window overrun: " + maxUnconfirmed, maxUnconfirmed <= window + producers * 64);
        assertEquals("bytes left counted in the window", 0, flow.unconfirmed());
        assertTrue(orb.isDrained());
        NativeBlocks.free(mem);
    }

    /** A reservation whose ring stayed full gives its window bytes back: they were never sent. */
    @Test
    public void aReservationThatTimedOutOnTheRingLeavesTheWindowAsItWas() throws Exception {
        long mem = NativeBlocks.allocate(64);
        Memory.fill(mem, 64, (byte) 0);
        try {
            FlowWindow flow = new FlowWindow(1 << 20, 1);
            RingConnection c = new RingConnection(1, new OutgoingRingBuffer(mem, 64), flow);
            RingRecord first = new RingRecord();
            assertTrue(c.reserve(40, FOREVER, false, first)); // the ring is now nearly full
            long before = flow.unconfirmed();
            try {
                c.reserve(40, System.nanoTime() + 5_000_000, false, new RingRecord());
                fail("the ring had no room");
            } catch (NetworkException expected) {
                assertTrue(expected.getMessage(), expected.getMessage().contains("timed out"));
            }
            assertEquals(before, flow.unconfirmed());
            assertFalse("a try finds the ring full", c.tryReserve(40, new RingRecord()));
            assertEquals(before, flow.unconfirmed());
            c.publish(first);
        } finally {
            NativeBlocks.free(mem);
        }
    }
}
