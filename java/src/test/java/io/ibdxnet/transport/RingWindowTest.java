package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * A ring's window ({@link OutgoingRingBuffer#START_WINDOW}): where it
 * starts, when it grows and when it must not (the records in use would map
 * to other indices), and producers racing a consumer that keeps half the
 * window in flight, so the window grows under them.
 */
public class RingWindowTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final int CAPACITY = 1 << 20;
    private static final int W = OutgoingRingBuffer.START_WINDOW;
    private static final int RECORD = 4096;

    private static long zeroed(int bytes) {
        long mem = NativeBlocks.allocate(bytes);
        Memory.fill(mem, bytes, (byte) 0);
        return mem;
    }

    /** Reserves and publishes one record of {@link #RECORD} bytes filled with {@code fill}; its position. */
    private static long record(OutgoingRingBuffer orb, int fill) {
        long p = orb.tryReserve(RECORD);
        assertTrue("room for a record: " + p, p >= 0);
        byte[] body = new byte[RECORD - 4];
        java.util.Arrays.fill(body, (byte) fill);
        orb.write(p + 4, body, 0, body.length);
        orb.publish(p, RECORD);
        return p;
    }

    /** Records from the front on until {@code reserved} is {@code to}; posted if {@code post}. */
    private static void fillTo(OutgoingRingBuffer orb, long to, boolean post) {
        while (orb.reservedPosition() < to) {
            record(orb, (int) (orb.reservedPosition() / RECORD));
        }
        if (post) {
            orb.posted(orb.readyToPost());
        }
    }

    /** Sends and confirms records until front and reserved are at {@code at}. */
    private static void passTo(OutgoingRingBuffer orb, long at) {
        while (orb.frontPosition() < at) {
            record(orb, 0);
            long n = orb.readyToPost();
            orb.posted(n);
            orb.confirmed(n);
        }
        assertEquals(at, orb.frontPosition());
    }

    private static void withRing(RingTest test) throws Exception {
        long mem = zeroed(CAPACITY);
        try {
            test.run(new OutgoingRingBuffer(mem, CAPACITY), mem);
        } finally {
            NativeBlocks.free(mem);
        }
    }

    interface RingTest {
        void run(OutgoingRingBuffer orb, long mem) throws Exception;
    }

    @Test
    public void aRingStartsWithItsStartWindowAndARecordLargerThanTheWindowGrowsIt() throws Exception {
        withRing((orb, mem) -> {
            assertEquals(W, orb.window());
            assertEquals(CAPACITY, orb.capacity());
            long p = orb.tryReserve(W + 100);
            assertEquals(0, p);
            assertEquals(2 * W, orb.window());
        });
        long small = zeroed(4096);
        try {
            assertEquals("a ring smaller than the start window uses all of it", 4096,
                    new OutgoingRingBuffer(small, 4096).window());
        } finally {
            NativeBlocks.free(small);
        }
    }

    @Test
    public void anEmptyRingsWindowGrowsAheadForAWriterThatFillsItBeforeAnythingIsPosted() throws Exception {
        withRing((orb, mem) -> {
            passTo(orb, W + RECORD);
            assertTrue(orb.ensureWindow(3 * W));
            assertEquals(4 * W, orb.window());
            fillTo(orb, W + RECORD + 3 * W, false); // all of it without a post
            assertEquals("not while records are in it", false, orb.ensureWindow(8 * W));
            assertEquals(4 * W, orb.window());
            assertTrue("small enough already", orb.ensureWindow(W));
        });
    }

    @Test
    public void aFullWindowOfRecordsNotYetPostedDoesNotGrow() throws Exception {
        withRing((orb, mem) -> {
            passTo(orb, 2 * W);
            fillTo(orb, 3 * W, false); // the send thread is behind: a larger window would only queue more
            assertEquals(OutgoingRingBuffer.FULL, orb.tryReserve(RECORD));
            assertEquals(W, orb.window());
        });
    }

    @Test
    public void aFullWindowInFlightGrowsOnlyWhenItsRecordsMapToTheSameIndices() throws Exception {
        withRing((orb, mem) -> {
            // In flight across the window's end (indices W/2.. and 0..W/2): another mask moves them.
            passTo(orb, W / 2);
            fillTo(orb, W / 2 + W, true);
            assertEquals(OutgoingRingBuffer.FULL, orb.tryReserve(RECORD));
            assertEquals(W, orb.window());
            // Contiguous, in an odd block (positions W..2W at indices 0..W; the doubled mask puts them at W..2W).
            orb.confirmed(W / 2);
            fillTo(orb, 2 * W, true);
            assertEquals(OutgoingRingBuffer.FULL, orb.tryReserve(RECORD));
            assertEquals(W, orb.window());
            // Contiguous in an even block: the same indices under both masks.
            orb.confirmed(W);
            fillTo(orb, 3 * W, true);
            long first = orb.frontPosition();
            assertEquals(2 * W, first);
            int firstFill = (int) (first / RECORD);
            long p = record(orb, 0x5A);
            assertEquals(2 * W, orb.window());
            assertEquals(3 * W, p);
            // The records in flight are where they were (index 0 on): the new one went to index W.
            assertEquals((byte) firstFill, Memory.getByte(mem + 4));
            assertEquals((byte) 0x5A, Memory.getByte(mem + W + 4));
            orb.confirmed(W);
            long n = orb.readyToPost();
            assertEquals(RECORD, n);
            assertEquals(W, orb.postOffset());
            assertEquals(RECORD, orb.postable());
        });
    }

    @Test
    public void whatIsPostableStopsAtTheWindowsEnd() throws Exception {
        withRing((orb, mem) -> {
            passTo(orb, W - RECORD);
            fillTo(orb, W + RECORD, false);
            assertEquals(2 * RECORD, orb.readyToPost());
            assertEquals(RECORD, orb.postable());
            assertEquals(W - RECORD, orb.postOffset());
            orb.posted(orb.postable());
            assertEquals(0, orb.postOffset());
            assertEquals(RECORD, orb.postable());
        });
    }

    /**
     * Producers write numbered records; the consumer takes what is postable
     * straight from the ring's memory (as the engine does), and confirms
     * only once more than half the window is in flight, so producers wait
     * on a full window with half of it in flight and the window grows under
     * them. Every record arrives whole, in order per producer.
     */
    @Test
    public void producersRacingAConsumerThatKeepsHalfTheWindowInFlightLoseNothingAsTheWindowGrows() throws Exception {
        withRing((orb, mem) -> {
            int producers = 3;
            int records = 40_000;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            RingRace.Producers threads = new RingRace.Producers(orb, producers, records, 600, false, deadline);
            ByteArrayOutputStream stream = new ByteArrayOutputStream();
            ArrayDeque<Long> inFlight = new ArrayDeque<>();
            int[] next = new int[producers];
            long received = 0;
            int parsed = 0;
            int windows = 0;
            int lastWindow = orb.window();
            try {
                while (received < (long) producers * records && threads.failure.get() == null) {
                    assertTrue("received " + received + " records in time", System.nanoTime() - deadline < 0);
                    long n = orb.postable();
                    if (n > 0) {
                        byte[] chunk = new byte[(int) n];
                        Memory.copy(mem + orb.postOffset(), chunk, 0, chunk.length);
                        stream.write(chunk, 0, chunk.length);
                        orb.posted(n);
                        inFlight.add(n);
                    }
                    if (n == 0 || orb.inFlight() > orb.window() / 2) {
                        Long oldest = inFlight.poll();
                        if (oldest != null) {
                            orb.confirmed(oldest);
                        }
                    }
                    if (orb.window() != lastWindow) {
                        lastWindow = orb.window();
                        windows++;
                    }
                    byte[] data = stream.toByteArray();
                    while (parsed + 4 <= data.length) {
                        int len = RingRace.readInt(data, parsed);
                        int size = OutgoingRingBuffer.aligned(len);
                        if (parsed + size > data.length) {
                            break;
                        }
                        assertTrue("a record length at " + parsed + ": " + len, len >= 12);
                        int id = RingRace.readInt(data, parsed + 4);
                        int seq = RingRace.readInt(data, parsed + 8);
                        assertTrue("producer id " + id + " at " + parsed, id >= 0 && id < producers);
                        assertEquals("producer " + id + "'s next record", next[id], seq);
                        byte[] expected = RingRace.body(id, seq, len - 12);
                        assertEquals(ByteBuffer.wrap(expected),
                                ByteBuffer.wrap(java.util.Arrays.copyOfRange(data, parsed + 4, parsed + len)));
                        next[id]++;
                        received++;
                        parsed += size;
                    }
                    if (parsed > (1 << 20)) {
                        stream.reset();
                        stream.write(data, parsed, data.length - parsed);
                        parsed = 0;
                    }
                }
            } finally {
                threads.stop();
            }
            System.out.println("RingWindowTest: " + received + " records, the window grew " + windows + " times to "
                    + orb.window() + " bytes");
            assertTrue("the window grew at least twice: " + windows, windows >= 2);
        });
    }
}
