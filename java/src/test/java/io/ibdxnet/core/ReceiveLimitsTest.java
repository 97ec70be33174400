package io.ibdxnet.core;

import static io.ibdxnet.core.BudgetFrames.concat;
import static io.ibdxnet.core.BudgetFrames.frames;
import static io.ibdxnet.core.BudgetFrames.payload;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.TestSupport;
import io.ibdxnet.core.BudgetFrames.Stream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The node's unfinished-message budget holds streams back, never breaks
 * them: a claim it cannot grant stops the assembler at that frame, which
 * resumes where it stopped; waiting streams are served first come, first
 * served; a connection without a reservation always gets messages up to its
 * share through; and a connection holding a full reservation never waits, so
 * interleaved streams of many connections all complete.
 */
public class ReceiveLimitsTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final int MAX = 1 << 16;
    /** Per connection 2 MAX, per node 4 MAX: one full reservation (3.5 MAX), shares of MAX / 32 from MAX / 2. */
    private static ReceiveLimits oneReservation() {
        ReceiveLimits l = new ReceiveLimits(MAX, 2 * MAX, 4 * MAX);
        assertEquals(MAX / 32, l.share);
        return l;
    }

    private static List<byte[]> large(int id) {
        return frames(id, MAX - 8, MAX / 4);
    }

    @Test
    public void theNodeBudgetHoldsAStreamBackAndItResumesWhereItStopped() throws ProtocolViolation {
        ReceiveLimits limits = oneReservation();
        StreamAssembler a = new StreamAssembler(5, 1, limits);
        StreamAssembler b = new StreamAssembler(6, 1, limits);
        List<byte[]> fa = large(1);
        List<byte[]> fb = new ArrayList<>(large(2));
        fb.addAll(frames(3, 100, 100)); // and a single-frame message behind it
        try (Stream sa = new Stream(a, concat(fa)); Stream sb = new Stream(b, concat(fb))) {
            assertEquals(fa.get(0).length, sa.feed(fa.get(0).length)); // a holds the only full reservation
            assertEquals("b stops after the header of the frame that waits", Frame.HEADER, sb.feedAll());
            assertTrue(b.waiting());
            assertFalse(b.broken());
            assertEquals(1, limits.waiting());
            long version = limits.version();
            assertEquals("nothing more while the budget is full", 0, sb.feedAll());
            assertTrue(b.waiting());
            assertEquals(version, limits.version());
            sa.feedAll();
            assertEquals(1, sa.messages.size());
            assertNotEquals("a's reservation came back: time to retry", version, limits.version());
            sb.feedAll();
            assertTrue(sb.done());
            assertEquals(2, sb.messages.size());
            assertArrayEquals(payload(2, MAX - 8), sb.messages.get(0));
            assertArrayEquals(payload(3, 100), sb.messages.get(1));
            assertEquals(0, limits.claimed());
            assertEquals(0, limits.reserved());
            assertEquals(0, limits.waiting());
        }
    }

    @Test
    public void waitingStreamsAreServedFirstComeFirstServedAndSmallMessagesDoNotOvertakeALargeOne() throws ProtocolViolation {
        ReceiveLimits limits = oneReservation();
        StreamAssembler a = new StreamAssembler(1, 1, limits);
        StreamAssembler b = new StreamAssembler(2, 1, limits);
        StreamAssembler c = new StreamAssembler(3, 1, limits);
        List<byte[]> fb = large(2);
        try (Stream sa = new Stream(a, concat(large(1))); Stream sb = new Stream(b, concat(fb));
                Stream sc = new Stream(c, concat(large(3)))) {
            sa.feed(MAX / 2); // a holds the reservation
            assertEquals(Frame.HEADER, sb.feedAll()); // b waits first
            assertEquals(Frame.HEADER, sc.feedAll()); // c second
            // Meanwhile a stream of small messages (within a share) from many connections passes.
            for (int i = 0; i < 50; i++) {
                try (Stream small = new Stream(new StreamAssembler(100 + i, 1, limits),
                        concat(frames(i, 1000, 300)))) {
                    small.feedAll();
                    assertTrue(small.done());
                    assertEquals(1, small.messages.size());
                }
            }
            sa.feedAll(); // the reservation comes back
            assertEquals("c asks first, but b waited longer", 0, sc.feedAll());
            assertTrue(c.waiting());
            assertEquals(fb.get(0).length - Frame.HEADER, sb.feed(fb.get(0).length - Frame.HEADER)); // b goes, holds it
            assertFalse(b.waiting());
            assertEquals(0, sc.feedAll());
            assertTrue(c.waiting());
            sb.feedAll();
            assertEquals(1, sb.messages.size());
            sc.feedAll();
            assertTrue(sc.done());
            assertEquals(1, sc.messages.size());
            assertEquals(0, limits.reserved());
        }
    }

    @Test
    public void aConnectionWithoutAReservationAlwaysGetsMessagesUpToItsShareThrough() throws ProtocolViolation {
        ReceiveLimits limits = oneReservation();
        int small = (int) limits.share - (int) ReceiveLimits.OVERHEAD; // the largest message a share holds
        // A peer that never finishes its message holds the full reservation for good.
        StreamAssembler hog = new StreamAssembler(1, 1, limits);
        List<Stream> open = new ArrayList<>();
        try (Stream h = new Stream(hog, large(1).get(0))) {
            h.feedAll();
            assertFalse(hog.waiting());
            // Any connection still gets messages within a share through, as many as it sends.
            List<byte[]> many = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                many.addAll(frames(i, small, small / 3 + 1));
            }
            try (Stream s = new Stream(new StreamAssembler(2, 1, limits), concat(many))) {
                s.feedAll();
                assertTrue(s.done());
                assertEquals(200, s.messages.size());
            }
            // 16 connections hold a share at once; the 17th waits for one of them.
            for (int i = 0; i < ReceiveLimits.SHARES + 1; i++) {
                Stream s = new Stream(new StreamAssembler(10 + i, 1, limits), concat(frames(i, small, small / 2 + 1)));
                open.add(s);
                s.feed(s.length / 2); // the first frame: the message's share is claimed, not finished
                assertEquals("connection " + i, i == ReceiveLimits.SHARES, s.assembler.waiting());
            }
            open.get(0).feedAll();
            assertEquals(1, open.get(0).messages.size());
            Stream last = open.get(ReceiveLimits.SHARES);
            last.feedAll();
            assertTrue(last.done());
            // A message above the share waits for the full reservation: held back, not a violation.
            try (Stream s = new Stream(new StreamAssembler(3, 1, limits), concat(frames(7, small + 1, small / 2)))) {
                assertEquals(Frame.HEADER, s.feedAll());
                assertTrue(s.assembler.waiting());
                assertFalse(s.assembler.broken());
                s.assembler.discard();
            }
        } finally {
            for (Stream s : open) {
                s.assembler.discard();
                s.close();
            }
        }
        hog.discard();
        assertEquals(0, limits.claimed());
        assertEquals(0, limits.reserved());
        assertEquals(0, limits.waiting());
    }

    /**
     * A message of exactly maxMessageSize claims its bytes plus the overhead:
     * with maxUnfinishedBytesPerConnection = maxMessageSize (which DXNetConfig
     * allows) that claim was above the connection's limit, an honest message
     * a "violation". The limit is raised to hold it.
     */
    @Test
    public void aMessageOfMaxMessageSizeIsNoViolationWhenThePerConnectionLimitIsMaxMessageSize() throws ProtocolViolation {
        ReceiveLimits limits = new ReceiveLimits(MAX, MAX, MAX);
        try (Stream s = new Stream(new StreamAssembler(1, 1, limits), concat(frames(1, MAX, MAX / 4)))) {
            s.feedAll();
            assertTrue(s.done());
            assertArrayEquals(payload(1, MAX), s.messages.get(0));
        }
        assertEquals(0, limits.reserved());
    }

    /**
     * No deadlock: many connections, each sending pairs of messages whose
     * frames interleave (a second message starts before the first is
     * complete, as two sender threads do), fed in random pieces, a waiting
     * stream retried only when the limits' version changed. Whoever waits
     * holds at most a share — a full reservation's holder never waits — and
     * every message arrives; a round without progress would be a deadlock.
     */
    @Test
    public void interleavedStreamsOfManyConnectionsAllCompleteAndOnlyStreamsWithoutAReservationWait()
            throws ProtocolViolation {
        Random r = new Random(19);
        int waits = 0;
        for (int round = 0; round < 30; round++) {
            ReceiveLimits limits = new ReceiveLimits(MAX, 2 * MAX, 6 * MAX); // two full reservations
            int k = 12 + r.nextInt(20);
            List<Stream> streams = new ArrayList<>();
            List<List<byte[]>> expected = new ArrayList<>();
            for (int i = 0; i < k; i++) {
                List<byte[]> frames = new ArrayList<>();
                List<byte[]> want = new ArrayList<>();
                for (int pair = 0; pair < 3; pair++) {
                    int id = pair * 2;
                    int s1 = r.nextInt(4) == 0 ? 1 + r.nextInt(3000) : 1 + r.nextInt(MAX - 100);
                    int s2 = r.nextInt(4) == 0 ? 1 + r.nextInt(3000) : 1 + r.nextInt(MAX - 100);
                    List<byte[]> f1 = frames(id, s1, 1000 + r.nextInt(MAX / 3));
                    List<byte[]> f2 = frames(id + 1, s2, 1000 + r.nextInt(MAX / 3));
                    for (int j = 0; j < Math.max(f1.size(), f2.size()); j++) { // frame by frame, alternating
                        if (j < f1.size()) {
                            frames.add(f1.get(j));
                        }
                        if (j < f2.size()) {
                            frames.add(f2.get(j));
                        }
                    }
                    want.add(payload(id, s1));
                    want.add(payload(id + 1, s2));
                }
                streams.add(new Stream(new StreamAssembler(i, 1, limits), concat(frames)));
                expected.add(want);
            }
            long[] seen = new long[k];
            Arrays.fill(seen, -1);
            try {
                int left = k;
                while (left > 0) {
                    boolean progress = false;
                    for (int i = 0; i < k; i++) {
                        Stream s = streams.get(i);
                        if (s.done() || (s.assembler.waiting() && seen[i] == limits.version())) {
                            continue;
                        }
                        seen[i] = limits.version();
                        int before = s.messages.size();
                        boolean wasWaiting = s.assembler.waiting();
                        int done = s.feed(1 + r.nextInt(MAX / 2));
                        progress |= done > 0 || s.messages.size() > before || wasWaiting != s.assembler.waiting();
                        if (s.assembler.waiting()) {
                            waits++;
                            assertTrue("a waiting stream holds at most a share: " + s.assembler.claimed(),
                                    s.assembler.claimed() <= limits.share);
                        }
                        assertFalse(s.assembler.broken());
                        if (s.done()) {
                            left--;
                        }
                    }
                    if (!progress) {
                        fail("round " + round + ": no stream made progress, " + left + " of " + k + " unfinished, "
                                + limits.waiting() + " waiting: a deadlock");
                    }
                }
                for (int i = 0; i < k; i++) {
                    List<byte[]> got = new ArrayList<>(streams.get(i).messages);
                    assertEquals(expected.get(i).size(), got.size());
                    for (byte[] w : expected.get(i)) {
                        assertTrue("message missing or corrupt", got.removeIf(g -> Arrays.equals(g, w)));
                    }
                }
                assertEquals(0, limits.claimed());
                assertEquals(0, limits.reserved());
            } finally {
                for (Stream s : streams) {
                    s.close();
                }
            }
        }
        assertTrue("the budget must have held streams back: " + waits, waits > 100);
    }
}
