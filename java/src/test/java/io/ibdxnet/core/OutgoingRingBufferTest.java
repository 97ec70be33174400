package io.ibdxnet.core;

import static io.ibdxnet.ib.UnsafeAccess.UNSAFE;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.Test;

public class OutgoingRingBufferTest {
    private static final long FOREVER = System.nanoTime() + 3_600_000_000_000L;

    @Test
    public void areasFollowTheFrontPostedPointer() throws Exception {
        long mem = UNSAFE.allocateMemory(64);
        try {
            OutgoingRingBuffer orb = new OutgoingRingBuffer(mem, 64);
            long p = orb.reserve(40, FOREVER);
            orb.write(p, new byte[40], 0, 40);
            orb.commit(p, 40);
            assertEquals(40, orb.readyToPost());
            orb.posted(30);
            assertEquals(10, orb.readyToPost());
            assertEquals(30, orb.postOffset());
            assertEquals(30, orb.inFlight());
            try {
                orb.reserve(30, System.nanoTime() + 1_000_000);
                fail("only 24 bytes are free");
            } catch (TimeoutException expected) {
                assertTrue(expected.getMessage().contains("full"));
            }
            orb.confirmed(30);
            long q = orb.reserve(30, FOREVER);
            assertEquals(40, q);
            // Wraps: bytes 40..63, then 0..5.
            byte[] data = new byte[30];
            for (int i = 0; i < 30; i++) {
                data[i] = (byte) (i + 1);
            }
            orb.write(q, data, 0, 30);
            assertEquals(24, UNSAFE.getByte(mem + 63));
            assertEquals(25, UNSAFE.getByte(mem));
            try {
                orb.reserve(65, FOREVER);
                fail("larger than the ring");
            } catch (IllegalArgumentException expected) {
                assertTrue(expected.getMessage().contains("65"));
            }
        } finally {
            UNSAFE.freeMemory(mem);
        }
    }

    /**
     * Stress: 4 producers write records [length, producer, sequence, payload...]
     * while a consumer thread posts and confirms like the send thread; the
     * consumer checks every record is intact and each producer's records arrive
     * in order, with no byte lost or duplicated.
     */
    @Test
    public void concurrentProducersNeverInterleaveOrLoseRecords() throws Exception {
        int capacity = 1 << 12;
        long mem = UNSAFE.allocateMemory(capacity);
        OutgoingRingBuffer orb = new OutgoingRingBuffer(mem, capacity);
        int producers = 4;
        int perProducer = 50_000;
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int p = 0; p < producers; p++) {
            final int id = p;
            Thread t = new Thread(() -> {
                try {
                    for (int seq = 0; seq < perProducer; seq++) {
                        int len = 6 + (seq * 7 + id) % 50;
                        byte[] rec = new byte[len];
                        rec[0] = (byte) len;
                        rec[1] = (byte) id;
                        rec[2] = (byte) seq;
                        rec[3] = (byte) (seq >>> 8);
                        rec[4] = (byte) (seq >>> 16);
                        for (int i = 5; i < len; i++) {
                            rec[i] = (byte) (id * 13 + seq + i);
                        }
                        long pos = orb.reserve(len, FOREVER);
                        orb.write(pos, rec, 0, len);
                        orb.commit(pos, len);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            threads.add(t);
            t.start();
        }
        long total = 0;
        int[] next = new int[producers];
        long read = 0;
        long expected = 0;
        for (int p = 0; p < producers; p++) {
            for (int seq = 0; seq < perProducer; seq++) {
                expected += 6 + (seq * 7 + p) % 50;
            }
        }
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (total < expected) {
            long ready = orb.readyToPost();
            if (ready == 0) {
                if (System.nanoTime() > deadline || failure.get() != null) {
                    StringBuilder dump = new StringBuilder();
                    for (Thread t : threads) {
                        dump.append(t.getName()).append(' ').append(t.getState()).append(' ');
                        for (StackTraceElement e : t.getStackTrace()) {
                            dump.append(e.getMethodName()).append(':').append(e.getLineNumber()).append(' ');
                        }
                        dump.append(" | ");
                    }
                    fail("stalled at " + total + " failure " + failure.get() + " " + dump + " ready " + orb.readyToPost() + " drained " + orb.isDrained());
                }
                Thread.yield();
                continue;
            }
            orb.posted(ready);
            // Parse whole records from [read, read + ready).
            long end = read + ready;
            while (read < end) {
                int len = UNSAFE.getByte(mem + (read & (capacity - 1))) & 0xFF;
                byte[] rec = new byte[len];
                for (int i = 0; i < len; i++) {
                    rec[i] = UNSAFE.getByte(mem + ((read + i) & (capacity - 1)));
                }
                int id = rec[1];
                int seq = (rec[2] & 0xFF) | (rec[3] & 0xFF) << 8 | (rec[4] & 0xFF) << 16;
                assertEquals("producer " + id + " order", next[id], seq);
                for (int i = 5; i < len; i++) {
                    assertEquals((byte) (id * 13 + seq + i), rec[i]);
                }
                next[id]++;
                read += len;
            }
            assertEquals("records end exactly at a commit boundary", end, read);
            orb.confirmed(ready);
            total += ready;
        }
        for (Thread t : threads) {
            t.join();
        }
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
        for (int p = 0; p < producers; p++) {
            assertEquals(perProducer, next[p]);
        }
        assertTrue(orb.isDrained());
        UNSAFE.freeMemory(mem);
    }
}
