package io.ibdxnet.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.TestSupport;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import io.ibdxnet.transport.OutgoingRingBuffer;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** A hostile stream: every broken header field is a {@link ProtocolViolation}, never anything worse. */
public class StreamAssemblerViolationTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final int MAX = 1 << 16;

    private static byte[] header(int length, int id, int flags, int request, int total) {
        byte[] h = new byte[Frame.HEADER];
        Frame.writeHeader(h, length, id, (byte) 1, (byte) 2, flags, request, total);
        return h;
    }

    private static byte[] frame(int id, int flags, int total, int payload) {
        byte[] f = new byte[OutgoingRingBuffer.aligned(Frame.HEADER + payload)];
        System.arraycopy(header(Frame.HEADER + payload, id, flags, 0, total), 0, f, 0, Frame.HEADER);
        return f;
    }

    private static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] p : parts) {
            out.write(p, 0, p.length);
        }
        return out.toByteArray();
    }

    /** Feeds {@code stream} (in one buffer); returns the violation's message, or null; counts messages. */
    private static String feed(StreamAssembler a, byte[] stream, List<Integer> delivered) {
        long mem = NativeBlocks.allocate(Math.max(1, stream.length));
        try {
            Memory.copy(stream, 0, mem, stream.length);
            a.feed(mem, stream.length, (src, t, st, fl, r, b, o, n) -> delivered.add(n));
            return null;
        } catch (ProtocolViolation e) {
            return e.getMessage();
        } finally {
            NativeBlocks.free(mem);
        }
    }

    private static String violation(byte[] stream) {
        ReceiveLimits limits = new ReceiveLimits(MAX, 4 * MAX, 8 * MAX);
        StreamAssembler a = new StreamAssembler(5, 1, limits);
        String v = feed(a, stream, new ArrayList<>());
        a.discard();
        assertEquals("every claim is given back", 0, limits.claimed());
        return v;
    }

    private static void assertViolation(String expected, byte[] stream) {
        String v = violation(stream);
        if (v == null || !v.contains(expected)) {
            fail("expected a violation containing '" + expected + "', got " + v);
        }
        assertTrue(v, v.startsWith("node 5: "));
    }

    @Test
    public void hugeClaimIsRefusedBeforeAnythingIsAllocated() {
        // The 20-byte frame that used to throw OutOfMemoryError in the coordinator.
        assertViolation("bytes (maxMessageSize", header(Frame.HEADER, 1, Frame.FIRST, 0, 0x7FFFFFFF));
        assertViolation("bytes (maxMessageSize", header(Frame.HEADER, 1, Frame.FIRST, 0, -1));
        assertViolation("bytes (maxMessageSize", header(Frame.HEADER + 4, 1, Frame.FIRST, 0, MAX + 1));
    }

    @Test
    public void everyHeaderFieldIsChecked() {
        assertViolation("shorter than a header", concat(header(8, 1, Frame.FIRST | Frame.LAST, 0, 0), new byte[12]));
        assertViolation("frame flags", frame(1, Frame.FIRST | Frame.LAST | 0x40, 0, 0));
        assertViolation("frame flags", frame(1, Frame.FIRST | Frame.LAST | Frame.REQUEST | Frame.RESPONSE, 0, 0));
        assertViolation("frame flags", frame(1, Frame.FIRST | Frame.LAST | Frame.ERROR, 0, 0));
        assertViolation("frame flags", frame(1, Frame.FIRST | Frame.LAST | Frame.REQUEST | Frame.ERROR, 0, 0));
        byte[] reserved = frame(1, Frame.FIRST | Frame.LAST, 0, 0);
        reserved[11] = 7;
        assertViolation("reserved 7", reserved);
        assertViolation("single-frame message of 10 bytes in a frame of 4", frame(1, Frame.FIRST | Frame.LAST, 10, 4));
        assertViolation("empty fragment", frame(1, Frame.FIRST, 10, 0));
        assertViolation("is not its last", frame(1, Frame.FIRST, 8, 8));
        assertViolation("fragment of unknown message 9", frame(9, Frame.LAST, 8, 8));
        assertViolation("started twice", concat(frame(1, Frame.FIRST, 16, 8), frame(1, Frame.FIRST, 16, 8)));
        assertViolation("ends at 24 of 16 bytes", concat(frame(1, Frame.FIRST, 16, 8), frame(1, Frame.LAST, 16, 16)));
        assertViolation("ends at 12 of 16 bytes (last)", concat(frame(1, Frame.FIRST, 16, 8), frame(1, Frame.LAST, 16, 4)));
        assertViolation("ends at 16 of 16 bytes (not last)", concat(frame(1, Frame.FIRST, 16, 8), frame(1, 0, 16, 8)));
        byte[] other = frame(1, Frame.LAST, 16, 8);
        other[8] = 9; // another type than the first frame said
        assertViolation("does not match its first frame", concat(frame(1, Frame.FIRST, 16, 8), other));
        assertViolation("does not match its first frame", concat(frame(1, Frame.FIRST, 16, 8), frame(1, Frame.LAST, 20, 8)));
    }

    /**
     * A connection's own unfinished claims above its limit are its fault: a
     * violation. The node budget is nobody's fault: a claim it cannot take
     * now holds the stream back (it waits, unbroken) until budget comes back.
     */
    @Test
    public void unfinishedMessagesAreBoundedPerConnectionWhileTheNodeBudgetOnlyHoldsBack() {
        ReceiveLimits limits = new ReceiveLimits(MAX, 2 * MAX, 3 * MAX);
        StreamAssembler a = new StreamAssembler(5, 1, limits);
        StreamAssembler b = new StreamAssembler(6, 1, limits);
        List<Integer> got = new ArrayList<>();
        // Each first frame claims its whole message (MAX - 100 bytes) before anything arrives.
        assertEquals(null, feed(a, frame(1, Frame.FIRST, MAX - 100, 4), got));
        String v = feed(a, concat(frame(2, Frame.FIRST, MAX - 100, 4), frame(3, Frame.FIRST, MAX - 100, 4)), got);
        assertTrue(v, v != null && v.contains("maxUnfinishedBytesPerConnection"));
        assertTrue(a.broken());
        assertEquals(2 * (MAX - 100 + ReceiveLimits.OVERHEAD), limits.claimed());
        // a holds the node's one full reservation (3 MAX leave room for one of 2 MAX besides the shares): b waits.
        assertEquals(null, feed(b, frame(1, Frame.FIRST, MAX - 100, 4), got));
        assertTrue(b.waiting());
        assertFalse(b.broken());
        assertEquals(2, a.discard());
        assertEquals(null, feed(b, new byte[0], got)); // fed again once budget came back: its frame starts
        assertFalse(b.waiting());
        assertEquals(MAX - 100 + ReceiveLimits.OVERHEAD, limits.claimed());
        assertEquals(1, b.discard());
        assertEquals(0, limits.claimed());
        assertTrue(got.isEmpty());
    }

    @Test
    public void completedMessagesGiveTheirClaimBack() {
        ReceiveLimits limits = new ReceiveLimits(MAX, MAX, MAX);
        StreamAssembler a = new StreamAssembler(5, 1, limits);
        List<Integer> got = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            // Each is nearly the whole per-connection budget: fails at once unless the last one gave it back.
            assertEquals(null, feed(a, concat(frame(i, Frame.FIRST, MAX - 100, MAX - 200), frame(i, Frame.LAST, MAX - 100, 100)), got));
        }
        assertEquals(100, got.size());
        assertEquals(0, limits.claimed());
    }

    /**
     * Random mutations of valid streams (bytes flipped, cut short, lengths and
     * totals replaced): the only outcomes are messages or a violation, and the
     * limits hold their accounting. {@code test.assemblerFuzzCases}: 10^5 in
     * CI, 10^6 in {@code ./ibdxnet bench fuzz} (FrameFuzzTest adds the real
     * receive path over nio and ib).
     */
    @Test
    public void mutatedStreamsEndInMessagesOrAViolationOnly() {
        Random r = new Random(42);
        ReceiveLimits limits = new ReceiveLimits(MAX, 4 * MAX, 8 * MAX);
        int violations = 0;
        int messages = 0;
        int cases = Integer.getInteger("test.assemblerFuzzCases", 100_000);
        for (int c = 0; c < cases; c++) {
            byte[] s = FrameMutator.mutate(r, FrameMutator.validStream(r, MAX), MAX);
            StreamAssembler a = new StreamAssembler(5, 1, limits);
            List<Integer> got = new ArrayList<>();
            // Fed in random pieces: the split must not matter.
            long mem = NativeBlocks.allocate(Math.max(1, s.length));
            try {
                Memory.copy(s, 0, mem, s.length);
                int at = 0;
                while (at < s.length) {
                    int n = Math.min(s.length - at, 1 + r.nextInt(300));
                    int done = a.feed(mem + at, n, (src, t, st, fl, req, b, o, len) -> {
                        assertTrue(len >= 0 && len <= MAX);
                        got.add(len);
                    });
                    assertEquals("one stream alone always gets the node's budget", n, done);
                    at += n;
                }
            } catch (ProtocolViolation e) {
                violations++;
            } finally {
                NativeBlocks.free(mem);
            }
            messages += got.size();
            a.discard();
            assertEquals(0, limits.claimed());
            assertEquals("every reservation is given back", 0, limits.reserved());
        }
        System.out.println("StreamAssembler fuzz: " + cases + " cases, " + violations + " violations, " + messages + " messages");
        assertTrue("mutations must break most streams: " + violations, violations > cases * 3 / 10);
        assertTrue("and leave some whole: " + messages, messages > cases / 10);
    }
}
