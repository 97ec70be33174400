package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.TestSupport;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

public class OutgoingRingBufferTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final long FOREVER = System.nanoTime() + 3_600_000_000_000L;

    private static int readLength(long mem, long pos, int capacity) {
        int v = 0;
        for (int i = 0; i < 4; i++) {
            v = v << 8 | (Memory.getByte(mem + ((pos + i) & (capacity - 1))) & 0xFF);
        }
        return v;
    }

    /** {@code bytes} of zeroed native memory (free with NativeBlocks.free). */
    private static long zeroed(int bytes) {
        long mem = NativeBlocks.allocate(bytes);
        Memory.fill(mem, bytes, (byte) 0);
        return mem;
    }

    @Test
    public void aClosedRingSaysSoInsteadOfThrowing() throws Exception {
        long mem = zeroed(64);
        try {
            OutgoingRingBuffer orb = new OutgoingRingBuffer(mem, 64);
            assertEquals(0, orb.reserve(8, FOREVER));
            orb.close();
            assertEquals(OutgoingRingBuffer.CLOSED, orb.reserve(8, FOREVER));
        } finally {
            NativeBlocks.free(mem);
        }
    }

    private static void record(OutgoingRingBuffer orb, int length, int fill) throws Exception {
        long p = orb.reserve(length, FOREVER);
        byte[] body = new byte[length - 4];
        java.util.Arrays.fill(body, (byte) fill);
        orb.write(p + 4, body, 0, body.length);
        orb.publish(p, length);
    }

    /**
     * The engine posts in work requests of its own size, so it may stop
     * inside a record; the connection may then close before the rest is
     * posted. The record's posted head must stay in the ring (not zeroed,
     * not freed) even when confirmed, so the stranded copy resends the record
     * whole on the next connection (the receiver drops the head it got on the
     * closed one). Before: the copy started at the cut, mid-record, and the
     * next connection's stream began with a length word read from the middle
     * of a message (a protocol violation at the receiver, the rest lost).
     */
    @Test
    public void aRecordPostedInPartIsKeptWholeForTheStrandedCopy() throws Exception {
        long mem = zeroed(128);
        try {
            OutgoingRingBuffer orb = new OutgoingRingBuffer(mem, 128);
            record(orb, 40, 1); // 0..39
            record(orb, 24, 2); // 40..63
            record(orb, 16, 3); // 64..79
            assertEquals(80, orb.readyToPost());
            orb.posted(50); // the first record and 10 bytes of the second
            orb.confirmed(50);
            assertEquals("only the first record, posted whole, is freed", 40, orb.frontPosition());
            assertEquals(128 - 80 + 40, freeSpace(orb));
            byte[] stranded = orb.copyStranded();
            assertEquals("the second record whole, and the third", 40, stranded.length);
            assertEquals(24, readLength(stranded, 0));
            for (int i = 4; i < 24; i++) {
                assertEquals("byte " + i + " of the partly posted record", 2, stranded[i]);
            }
            assertEquals(16, readLength(stranded, 24));
            // The rest of the record posted and confirmed: its space is freed and zeroed.
            orb.posted(14);
            orb.confirmed(14);
            assertEquals(128 - 16, freeSpace(orb));
            assertEquals(0, Memory.getInt(mem + 40));
            assertEquals(16, orb.copyStranded().length);
            assertEquals(16, orb.inFlight() + orb.readyToPost());
        } finally {
            NativeBlocks.free(mem);
        }
    }

    private static int readLength(byte[] b, int at) {
        return (b[at] & 0xFF) << 24 | (b[at + 1] & 0xFF) << 16 | (b[at + 2] & 0xFF) << 8 | (b[at + 3] & 0xFF);
    }

    /** Bytes a reservation could take now. */
    private static long freeSpace(OutgoingRingBuffer orb) {
        return orb.capacity() - (orb.reservedPosition() - orb.frontPosition());
    }

    @Test
    public void areasFollowTheFrontPostedPointerAndUnpublishedRecordsBlockTheWalk() throws Exception {
        long mem = zeroed(64);
        try {
            OutgoingRingBuffer orb = new OutgoingRingBuffer(mem, 64);
            long p = orb.reserve(38, FOREVER); // occupies 40
            long q = orb.reserve(8, FOREVER);
            assertEquals(40, q);
            orb.publish(q, 8);
            assertEquals("the later record waits for the earlier one", 0, orb.readyToPost());
            orb.write(p + 4, new byte[34], 0, 34);
            orb.publish(p, 38);
            assertEquals(48, orb.readyToPost());
            assertEquals(38, readLength(mem, 0, 64));
            orb.posted(40);
            assertEquals(8, orb.readyToPost());
            assertEquals(40, orb.postOffset());
            assertEquals(40, orb.inFlight());
            try {
                orb.reserve(24, System.nanoTime() + 1_000_000);
                fail("only 16 bytes are free");
            } catch (TimeoutException expected) {
                assertTrue(expected.getMessage().contains("full"));
            }
            orb.confirmed(40);
            assertEquals("confirmed space is zeroed", 0, Memory.getInt(mem));
            long r = orb.reserve(30, FOREVER); // 48..79: wraps to 0..15
            assertEquals(48, r);
            byte[] data = new byte[26];
            for (int i = 0; i < 26; i++) {
                data[i] = (byte) (i + 1);
            }
            orb.write(r + 4, data, 0, 26);
            assertEquals(12, Memory.getByte(mem + 63));
            assertEquals(13, Memory.getByte(mem));
            try {
                orb.reserve(65, FOREVER);
                fail("larger than the ring");
            } catch (IllegalArgumentException expected) {
                assertTrue(expected.getMessage().contains("65"));
            }
        } finally {
            NativeBlocks.free(mem);
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
        assertEquals(0, producersAndConsumer(false));
    }

    /** The same while the consumer moves the ring on to index 0 whenever it finds it empty. */
    @Test
    public void concurrentProducersLoseNothingWhileTheEmptyRingIsMovedOn() throws Exception {
        assertTrue("the ring was never found empty and moved on", producersAndConsumer(true) > 0);
    }

    @Test
    public void onlyAnEmptyRingIsMovedOnToItsFirstByte() throws Exception {
        int capacity = 1 << 12;
        long mem = zeroed(capacity);
        OutgoingRingBuffer orb = new OutgoingRingBuffer(mem, capacity);
        assertFalse("already at index 0", orb.rewindIfEmpty());
        record(orb, 100, 1);
        assertFalse("a record waits", orb.rewindIfEmpty());
        long ready = orb.readyToPost();
        orb.posted(ready);
        assertFalse("posted, not confirmed", orb.rewindIfEmpty());
        orb.confirmed(ready);
        assertTrue(orb.rewindIfEmpty());
        assertEquals(0, orb.postOffset());
        long pos = orb.reserve(8, FOREVER);
        assertEquals("the next record starts the ring's second lap", capacity, pos);
        NativeBlocks.free(mem);
    }

    /** Producers against a consumer (moving the ring on when empty if asked); how often it moved. */
    private static int producersAndConsumer(boolean rewind) throws Exception {
        int capacity = 1 << 12;
        long mem = zeroed(capacity);
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
                        int len = 9 + (seq * 7 + id) % 50;
                        byte[] rec = new byte[len];
                        rec[4] = (byte) id;
                        rec[5] = (byte) seq;
                        rec[6] = (byte) (seq >>> 8);
                        rec[7] = (byte) (seq >>> 16);
                        for (int i = 8; i < len; i++) {
                            rec[i] = (byte) (id * 13 + seq + i);
                        }
                        long pos = orb.reserve(len, FOREVER);
                        orb.write(pos + 4, rec, 4, len - 4);
                        orb.publish(pos, len);
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
        long deadline = System.nanoTime() + 60_000_000_000L;
        long consumed = 0;
        int rewinds = 0;
        while (consumed < expected) {
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
                byte[] rec = new byte[len];
                for (int i = 0; i < len; i++) {
                    rec[i] = Memory.getByte(mem + ((read + i) & (capacity - 1)));
                }
                int id = rec[4];
                int seq = (rec[5] & 0xFF) | (rec[6] & 0xFF) << 8 | (rec[7] & 0xFF) << 16;
                assertEquals("producer " + id + " order", next[id], seq);
                for (int i = 8; i < len; i++) {
                    assertEquals((byte) (id * 13 + seq + i), rec[i]);
                }
                next[id]++;
                read += OutgoingRingBuffer.aligned(len);
            }
            assertEquals("records end exactly where the walk stopped", end, read);
            orb.confirmed(ready);
            consumed += ready;
            if (rewind && orb.rewindIfEmpty()) {
                rewinds++;
                read = (read + capacity) & -(long) capacity;
                assertEquals(0, orb.postOffset());
            }
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
        NativeBlocks.free(mem);
        return rewinds;
    }

    /**
     * The producers' CAS counter and the send thread's pointers are at least
     * 128 bytes (two cache lines) apart, from each other and from the fields
     * every thread reads, as the JVM actually laid them out.
     */
    @Test
    public void theProducersCounterAndTheSendThreadsPointersDoNotShareACacheLine() throws Exception {
        // Field offsets come from sun.misc.Unsafe, which warns on first use from JDK 24 on (JEP 498).
        org.junit.Assume.assumeTrue("field offsets are read on JDK 17-22", Runtime.version().feature() < 23);
        Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
        java.lang.reflect.Field theUnsafe = unsafeClass.getDeclaredField("theUnsafe");
        theUnsafe.setAccessible(true);
        Object unsafe = theUnsafe.get(null);
        java.lang.reflect.Method offsetOf = unsafeClass.getMethod("objectFieldOffset", java.lang.reflect.Field.class);
        java.util.function.BiFunction<Class<?>, String, Long> offset = (c, name) -> {
            try {
                return (Long) offsetOf.invoke(unsafe, c.getDeclaredField(name));
            } catch (ReflectiveOperationException e) {
                throw new AssertionError(e);
            }
        };
        long reserved = offset.apply(RingLayout.ProducerFields.class, "reserved");
        long[] cold = {offset.apply(RingLayout.ColdFields.class, "address"), offset.apply(RingLayout.ColdFields.class, "capacity"),
                offset.apply(RingLayout.ColdFields.class, "mask"), offset.apply(RingLayout.ColdFields.class, "closed")};
        long[] consumer = {offset.apply(RingLayout.ConsumerFields.class, "front"), offset.apply(RingLayout.ConsumerFields.class, "back"),
                offset.apply(RingLayout.ConsumerFields.class, "frontPosted")};
        long lastPad = offset.apply(RingLayout.Pad3.class, "r15");
        for (long c : cold) {
            assertTrue("read-mostly field at " + c + ", the producers' counter at " + reserved, reserved - c >= 128);
        }
        for (long c : consumer) {
            assertTrue("send thread's field at " + c + ", the producers' counter at " + reserved, c - reserved >= 128);
            assertTrue("send thread's field at " + c + ", the object's end near " + lastPad, lastPad + 8 - c >= 128);
        }
    }
}
