package io.ibdxnet.core;

import static io.ibdxnet.core.BudgetFrames.concat;
import static io.ibdxnet.core.BudgetFrames.frames;
import static io.ibdxnet.core.BudgetFrames.payload;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.RingRecord;
import io.ibdxnet.transport.Transport;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The bytes of a waiting stream: copied out of their receive buffers (which
 * may be reused at once), fed again in order once the budget has room, and
 * confirmed to the transport only then, each buffer once.
 */
public class StreamBacklogTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    private static final int MAX = 1 << 16;

    /** Records what is confirmed; nothing else is used. */
    private static final class Confirms implements Transport {
        final List<IncomingBuffer> consumed = new ArrayList<>();

        @Override
        public void consumed(IncomingBuffer b) {
            consumed.add(b);
        }

        @Override
        public void addNode(int id, String host, int port) {}

        @Override
        public int localPort() {
            return 0;
        }

        @Override
        public int maxFrameSize() {
            return 0;
        }

        @Override
        public void send(int node, byte[] header, byte[] payload, int offset, int length, long deadlineNanos) {}

        @Override
        public void reserve(int node, int length, long deadlineNanos, RingRecord record) {}

        @Override
        public void publish(RingRecord record) {}

        @Override
        public void closeConnection(int node, int connection, String reason) {}

        @Override
        public String name() {
            return "confirms";
        }

        @Override
        public Map<String, Long> stats() {
            return Map.of();
        }

        @Override
        public void close() {}
    }

    @Test
    public void keptBytesAreFedInOrderOnceTheBudgetHasRoomAndConfirmedOnlyThen() throws ProtocolViolation {
        ReceiveLimits limits = new ReceiveLimits(MAX, 2 * MAX, 4 * MAX); // one full reservation
        StreamAssembler hog = new StreamAssembler(1, 1, limits);
        StreamAssembler a = new StreamAssembler(2, 1, limits);
        List<byte[]> got = new ArrayList<>();
        StreamAssembler.Sink sink = (src, t, st, fl, r, b, o, n) -> got.add(StreamAssemblerTest.copy(b, o, n));
        byte[] stream = concat(List.of(concat(frames(1, MAX - 8, MAX / 4)), concat(frames(2, 50, 50)),
                concat(frames(3, MAX / 2, MAX / 8))));
        List<byte[]> hogFrames = frames(9, MAX - 8, MAX / 4);
        long mem = NativeBlocks.allocate(stream.length);
        long hogMem = NativeBlocks.allocate(MAX * 2);
        Confirms transport = new Confirms();
        StreamBacklog w = new StreamBacklog();
        try {
            Memory.copy(hogFrames.get(0), 0, hogMem, hogFrames.get(0).length);
            hog.feed(hogMem, hogFrames.get(0).length, sink); // holds the reservation
            // The stream arrives in three buffers; a waits in the first.
            int[] cut = {0, 1000, stream.length / 2, stream.length};
            List<IncomingBuffer> buffers = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                buffers.add(new IncomingBuffer(2, mem + cut[i], cut[i + 1] - cut[i], 1, i, id -> {}));
            }
            Memory.copy(stream, 0, mem, stream.length);
            int done = a.feed(buffers.get(0).address, buffers.get(0).length, sink);
            assertTrue(a.waiting());
            w.keep(buffers.get(0), done);
            w.keep(buffers.get(1), 0);
            w.keep(buffers.get(2), 0);
            assertEquals(stream.length - done, w.bytes());
            Memory.fill(mem, stream.length, (byte) 0x5A); // the receive buffers are reused at once: the backlog has its own copy
            assertFalse("the budget is still held", w.feedTo(a, sink));
            assertTrue(transport.consumed.isEmpty());
            byte[] rest = concat(hogFrames.subList(1, hogFrames.size()));
            Memory.copy(rest, 0, hogMem, rest.length);
            hog.feed(hogMem, rest.length, sink); // the hog's message completes, its reservation comes back
            assertEquals(1, got.size());
            assertTrue(w.feedTo(a, sink));
            assertFalse(a.waiting());
            assertEquals(0, w.bytes());
            assertEquals(4, got.size());
            assertArrayEquals(payload(1, MAX - 8), got.get(1));
            assertArrayEquals(payload(2, 50), got.get(2));
            assertArrayEquals(payload(3, MAX / 2), got.get(3));
            w.confirm(transport);
            assertEquals("each buffer confirmed once, in order", buffers, transport.consumed);
            assertEquals(0, limits.claimed());
            assertEquals(0, limits.reserved());
        } finally {
            NativeBlocks.free(mem);
            NativeBlocks.free(hogMem);
        }
    }
}
