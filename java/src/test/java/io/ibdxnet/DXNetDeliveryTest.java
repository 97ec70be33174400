package io.ibdxnet;

import static io.ibdxnet.DataMessage.DATA;
import static io.ibdxnet.DataMessage.TYPE;
import static io.ibdxnet.TestSupport.assertHoldsFor;
import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The messaging suite's delivery, over every transport: messages from many
 * threads arrive intact, once and in order per sender (copied, serialised in
 * place, beyond the ring, 16 × 100 000), a message that misstates its size
 * fails alone, received copies are counted, a node's messages to itself are
 * delivered locally and unregistered types are dropped and counted.
 */
public class DXNetDeliveryTest extends DXNetSuite {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    static final byte UNKNOWN = 9;

    /** Something a sender thread does for one sequence number. */
    @Test
    public void messagesFromManyThreadsArriveIntactAndInOrderPerThread() throws Exception {
        List<DXNet> n = start(2);
        int threads = 4;
        int perThread = 2000;
        ConcurrentHashMap<Integer, Integer> nextSeq = new ConcurrentHashMap<>();
        AtomicLong received = new AtomicLong();
        AtomicReference<String> problem = new AtomicReference<>();
        // One handler thread: arrival order is delivery order.
        n.get(1).register(TYPE, DATA, m -> {
            DataMessage d = (DataMessage) m;
            int expected = nextSeq.getOrDefault(d.thread, 0);
            if (d.seq != expected || !d.intact() || d.getSource() != 0) {
                problem.compareAndSet(null, "thread " + d.thread + " seq " + d.seq + " expected " + expected + " intact " + d.intact());
            }
            nextSeq.put(d.thread, expected + 1);
            received.incrementAndGet();
        });
        // Mostly small, some beyond a receive buffer, every 500th larger than the ring.
        Senders.run(threads, perThread, (id, seq) -> {
            int size = seq % 500 == 499 ? 600_000 : seq % 10 == 0 ? 40_000 : (seq * 37) % 300;
            n.get(0).sendMessage(new DataMessage(1, id, seq, size));
        });
        waitFor("all messages", () -> received.get() == (long) threads * perThread || problem.get() != null);
        assertEquals(null, problem.get());
        assertEquals(0, n.get(1).droppedMessages());
    }

    /**
     * Messages of declared size that fit a frame are serialised straight into
     * the ring; mixed with copied ones (size not declared, or larger than a
     * frame: 600 000 bytes, with frames of at most 128 KiB on ib and 256 KiB
     * on nio and loopback here) from many threads, all arrive intact and in
     * order per thread, and exactly the copied ones are counted as copies —
     * so the others took the in-place path.
     */
    @Test
    public void inPlaceAndCopiedMessagesFromManyThreadsArriveIntactAndInOrder() throws Exception {
        List<DXNet> n = start(2, "100", c -> c.nioRingSize = 512 << 10);
        int threads = 4;
        int perThread = 2000;
        int[] next = new int[threads];
        AtomicLong received = new AtomicLong();
        AtomicReference<String> problem = new AtomicReference<>();
        n.get(1).register(TYPE, DATA, m -> {
            DataMessage d = (DataMessage) m;
            if (d.seq != next[d.thread] || !d.intact()) {
                problem.compareAndSet(null, "thread " + d.thread + " seq " + d.seq + " expected " + next[d.thread] + " intact " + d.intact());
            }
            next[d.thread] = d.seq + 1;
            received.incrementAndGet();
        });
        AtomicLong copies = new AtomicLong();
        Senders.run(threads, perThread, (id, seq) -> {
            int size = seq % 250 == 249 ? 600_000 : seq % 10 == 0 ? 40_000 : (seq * 37) % 300;
            DataMessage m = new DataMessage(1, id, seq, size);
            if (seq % 3 != 0) {
                m.declare(0);
            }
            if (seq % 3 == 0 || size > 128 << 10) {
                copies.incrementAndGet();
            }
            n.get(0).sendMessage(m);
        });
        waitFor("all messages", () -> received.get() == (long) threads * perThread || problem.get() != null);
        assertEquals(null, problem.get());
        for (int t = 0; t < threads; t++) {
            assertEquals(perThread, next[t]);
        }
        Map<String, Long> stats = n.get(0).transportStats();
        assertEquals("copied (the rest went in place)", copies.get(), (long) stats.get("messages_copied"));
        assertTrue(copies.get() < (long) threads * perThread / 2);
        assertEquals(0L, (long) stats.get("in_place_aborted"));
        assertEquals(0, n.get(1).droppedMessages());
    }

    /**
     * A message whose declared size is wrong, or whose export throws, fails
     * its send alone: its reserved frame goes out as one the receiver skips,
     * no protocol violation, and the messages before and after arrive.
     */
    @Test
    public void aMessageThatMisstatesItsSizeFailsAloneAndTheStreamGoesOn() throws Exception {
        List<DXNet> n = start(2);
        ConcurrentLinkedQueue<Integer> got = new ConcurrentLinkedQueue<>();
        n.get(1).register(TYPE, DATA, m -> got.add(((DataMessage) m).seq));
        n.get(0).sendMessage(new DataMessage(1, 0, 0, 100).declare(0));
        for (int error : new int[] {-1, 1, -100, 3}) {
            try {
                n.get(0).sendMessage(new DataMessage(1, 0, 1, 100).declare(error));
                fail("a size off by " + error + " was sent");
            } catch (IllegalStateException expected) {
                assertTrue(expected.getMessage(), expected.getMessage().contains("payloadSize()"));
            }
        }
        DataMessage exploding = new DataMessage(1, 0, 1, 100).declare(0);
        exploding.explode = true;
        try {
            n.get(0).sendMessage(exploding);
            fail("the export's exception was swallowed");
        } catch (UnsupportedOperationException expected) {
            assertEquals("exploded mid-export", expected.getMessage());
        }
        n.get(0).sendMessage(new DataMessage(1, 0, 1, 100).declare(0));
        n.get(0).sendMessage(new DataMessage(1, 0, 2, 100));
        waitFor("the messages around the failures", () -> got.size() == 3);
        assertEquals(java.util.Arrays.asList(0, 1, 2), new ArrayList<>(got));
        assertEquals(5L, (long) n.get(0).transportStats().get("in_place_aborted"));
        assertEquals(0L, (long) n.get(1).transportStats().get("protocol_violations"));
        assertEquals(0, n.get(1).droppedMessages());
        assertTrue(n.get(1).healthy());
    }

    /** 16 sender threads × 100 000 small messages; per sender: 0 lost, 0 duplicated, in order. */
    @Test
    public void sixteenSendersHundredThousandMessagesEach() throws Exception {
        List<DXNet> n = start(2);
        int threads = 16;
        int perThread = 100_000;
        int[] next = new int[threads];
        AtomicLong received = new AtomicLong();
        AtomicReference<String> problem = new AtomicReference<>();
        n.get(1).register(TYPE, DATA, m -> {
            DataMessage d = (DataMessage) m;
            if (d.seq != next[d.thread] || !d.intact()) {
                problem.compareAndSet(null, "thread " + d.thread + " seq " + d.seq + " expected " + next[d.thread]);
            }
            next[d.thread] = d.seq + 1;
            received.incrementAndGet();
        });
        Senders.run(threads, perThread, (id, seq) -> n.get(0).sendMessage(new DataMessage(1, id, seq, 8)));
        waitFor("all messages", () -> received.get() >= (long) threads * perThread || problem.get() != null);
        assertEquals(null, problem.get());
        assertHoldsFor("no duplicates", 50, () -> received.get() == (long) threads * perThread);
        for (int t = 0; t < threads; t++) {
            assertEquals(perThread, next[t]);
        }
    }

    /**
     * Small messages are imported where they lie in the receive buffer; a
     * message of several frames is assembled in a heap array, and that copy
     * is counted ({@code messages_received_copied}).
     */
    @Test
    public void receivedCopiesAreCountedAndSmallMessagesAreNotCopied() throws Exception {
        List<DXNet> n = start(2);
        List<DataMessage> got = new java.util.concurrent.CopyOnWriteArrayList<>();
        n.get(1).register(TYPE, DATA, m -> got.add((DataMessage) m));
        int small = 200;
        for (int s = 0; s < small; s++) {
            n.get(0).sendMessage(new DataMessage(1, 0, s, 32));
        }
        waitFor("the small messages", () -> got.size() == small);
        long copiedSmall = n.get(1).transportStats().get("messages_received_copied");
        DataMessage large = new DataMessage(1, 0, small, 3 * n.get(0).maxFrameSize());
        n.get(0).sendMessage(large);
        waitFor("the large message", () -> got.size() == small + 1);
        assertTrue("the large message arrived changed", java.util.Arrays.equals(large.payload, got.get(small).payload));
        long copied = n.get(1).transportStats().get("messages_received_copied");
        // A small message is copied only where it straddles two receive buffers.
        assertTrue(copiedSmall + " of " + small + " small messages copied", copiedSmall < small / 10);
        assertEquals("the multi-frame message is counted once", copiedSmall + 1, copied);
    }

    @Test
    public void messagesToTheOwnNodeAreDeliveredLocally() throws Exception {
        List<DXNet> n = start(1);
        ConcurrentLinkedQueue<DataMessage> got = new ConcurrentLinkedQueue<>();
        n.get(0).register(TYPE, DATA, m -> got.add((DataMessage) m));
        n.get(0).sendMessage(new DataMessage(0, 1, 2, 100));
        waitFor("local delivery", () -> !got.isEmpty());
        assertTrue(got.peek().intact());
        assertEquals(0, got.peek().getSource());
    }

    @Test
    public void unregisteredTypesAreDroppedAndCounted() throws Exception {
        List<DXNet> n = start(2);
        Message unknown = new Message(1, TYPE, UNKNOWN) {
            @Override
            protected void exportPayload(MessageExporter out) {
                out.writeInt(1);
            }

            @Override
            protected void importPayload(MessageImporter in) {}
        };
        n.get(0).sendMessage(unknown);
        waitFor("drop counted", () -> n.get(1).droppedMessages() == 1);
        long t0 = System.nanoTime();
        n.get(0).close();
        n.get(1).close();
        assertTrue("closing took too long", System.nanoTime() - t0 < 3_000_000_000L);
    }
}
