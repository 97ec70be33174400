package io.ibdxnet.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.memory.Memory;
import io.ibdxnet.transport.IncomingBuffer;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import io.ibdxnet.TestSupport;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** Lanes per source: round-robin, shares, the guaranteed minimum, holding, spilling. */
public class IncomingBufferQueueTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    private final List<Integer> released = new ArrayList<>();
    private final ByteBuffer memory = ByteBuffer.allocateDirect(1 << 16);

    private IncomingBuffer buffer(int source, int id, int length) {
        return new IncomingBuffer(source, Memory.address(memory) + id * 16L, length, 1, id, released::add);
    }

    private static List<Integer> drain(IncomingBufferQueue q) throws InterruptedException {
        List<Integer> ids = new ArrayList<>();
        IncomingBuffer b;
        while ((b = q.poll(0)) != null) {
            ids.add(b.source);
            q.finished(b);
        }
        return ids;
    }

    @Test
    public void sourcesTakeTurnsOneBufferEach() throws Exception {
        IncomingBufferQueue q = new IncomingBufferQueue(100, 1 << 20, 100, 1 << 20);
        for (int i = 0; i < 3; i++) {
            assertTrue(q.offer(buffer(1, i, 10)));
        }
        assertTrue(q.offer(buffer(2, 10, 10)));
        assertTrue(q.offer(buffer(3, 20, 10)));
        assertEquals(List.of(1, 2, 3, 1, 1), drain(q));
        assertTrue(q.idle());
    }

    /** A source over its share is refused, the others are not; one with nothing here always gets one buffer in. */
    @Test
    public void aSourceOverItsShareIsRefusedAlone() {
        IncomingBufferQueue q = new IncomingBufferQueue(4, 1_000, 2, 500);
        assertTrue(q.offer(buffer(1, 0, 100)));
        assertTrue(q.offer(buffer(1, 1, 100)));
        assertFalse("source 1 holds its 2 buffers", q.offer(buffer(1, 2, 100)));
        assertTrue(q.offer(buffer(2, 3, 100)));
        assertTrue(q.offer(buffer(2, 4, 100)));
        assertFalse("the node holds its 4 buffers", q.offer(buffer(3, 5, 100)) && q.offer(buffer(3, 6, 100)));
        assertTrue("a source with nothing here: its guaranteed minimum", q.offer(buffer(4, 7, 900)));
        assertEquals(List.of(), released);
    }

    /** A buffer given back holds its lane (others go on) until resumed, then comes first again. */
    @Test
    public void aHeldLaneIsSkippedUntilResumed() throws Exception {
        IncomingBufferQueue q = new IncomingBufferQueue(100, 1 << 20, 100, 1 << 20);
        q.offer(buffer(1, 0, 10));
        q.offer(buffer(1, 1, 10));
        q.offer(buffer(2, 2, 10));
        IncomingBuffer first = q.poll(0);
        assertEquals(1, first.source);
        q.giveBack(first);
        assertFalse(q.idle(1));
        IncomingBuffer b = q.poll(0);
        assertEquals(2, b.source);
        q.finished(b);
        assertNull("source 1 is held", q.poll(0));
        q.resume(1);
        IncomingBuffer again = q.poll(0);
        assertEquals("the given-back buffer is first again", first.address, again.address);
        q.finished(again);
        assertEquals(List.of(1), drain(q));
        assertTrue(q.idle());
    }

    /**
     * Spill mode (a transport that cannot hold one source back): beyond its
     * share a source's buffers are kept, and once it holds its share of receive
     * buffers the next ones are copied out, their receive buffers released at once.
     */
    @Test
    public void spillModeKeepsBuffersBeyondTheShareAndCopiesThemOut() throws Exception {
        IncomingBufferQueue q = new IncomingBufferQueue(100, 1 << 20, 2, 1 << 20);
        q.spillOverShare(true);
        for (int i = 0; i < 6; i++) {
            Memory.putByte(Memory.address(memory) + i * 16L, (byte) (i + 1));
            assertTrue(q.offer(buffer(1, i, 4)));
        }
        assertEquals("four of six copied out, their receive buffers back", List.of(2, 3, 4, 5), released);
        assertEquals(4, q.spilledBuffers());
        assertEquals(16, q.spilledBytes());
        assertEquals("only the share counts in the node's bytes", 8, q.bytes());
        for (int i = 0; i < 6; i++) {
            IncomingBuffer b = q.poll(0);
            assertEquals("bytes intact and in order", i + 1, Memory.getByte(b.address));
            if (i >= 2) {
                assertNotEquals("a copy", Memory.address(memory) + i * 16L, b.address);
            }
            b.release();
            q.finished(b);
        }
        assertTrue(q.idle());
        assertEquals(0, q.bytes());
        assertEquals(0, q.size());
    }

    /**
     * A held lane keeps one receive buffer, its first (parsed in part): the
     * others are copied out and released at once, and so is what arrives
     * while it is held. Bytes, order and the parsed offset survive.
     */
    @Test
    public void aHeldLaneKeepsOneReceiveBuffer() throws Exception {
        IncomingBufferQueue q = new IncomingBufferQueue(100, 1 << 20, 100, 1 << 20);
        for (int i = 0; i < 3; i++) {
            Memory.putByte(Memory.address(memory) + i * 16L, (byte) (i + 1));
            assertTrue(q.offer(buffer(1, i, 4)));
        }
        IncomingBuffer first = q.poll(0);
        first.parsed = 2;
        q.giveBack(first);
        assertEquals("the two behind the held first one", List.of(1, 2), released);
        Memory.putByte(Memory.address(memory) + 3 * 16L, (byte) 4);
        assertTrue(q.offer(buffer(1, 3, 4)));
        assertEquals("arrived while held", List.of(1, 2, 3), released);
        q.resume(1);
        for (int i = 0; i < 4; i++) {
            IncomingBuffer b = q.poll(0);
            assertEquals("bytes intact and in order", i + 1, Memory.getByte(b.address));
            assertEquals(i == 0 ? 2 : 0, b.parsed);
            b.release();
            q.finished(b);
        }
        assertEquals(List.of(1, 2, 3, 0), released);
        assertTrue(q.idle());
    }

    /** {@link IncomingBufferQueue#wake} ends a long wait of the consumer at once, with nothing. */
    @Test
    public void wakeEndsTheConsumersWait() throws Exception {
        IncomingBufferQueue q = new IncomingBufferQueue(100, 1 << 20, 100, 1 << 20);
        long[] waited = {-1};
        Thread consumer = new Thread(() -> {
            long t0 = System.nanoTime();
            try {
                if (q.poll(10_000) == null) {
                    waited[0] = System.nanoTime() - t0;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        consumer.start();
        io.ibdxnet.TestSupport.awaitWaiting(consumer);
        q.wake();
        consumer.join(5_000);
        assertTrue("returned null within 5 s, not after the 10 s wait: " + waited[0], waited[0] > 0 && waited[0] < 5_000_000_000L);
    }
}
