package io.ibdxnet.core;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.Codec;
import io.ibdxnet.TestSupport;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import io.ibdxnet.transport.OutgoingRingBuffer;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

public class StreamAssemblerTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final ReceiveLimits LIMITS = new ReceiveLimits(1 << 20, 4 << 20, 16 << 20);
    /** Every primitive type and array, written and read back through frames. */
    private static byte[] payload() {
        return Codec.samplePayload();
    }

    static byte[] frames(byte[] payload, int maxChunk, int messageId) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] h = new byte[Frame.HEADER];
        int at = 0;
        do {
            int n = Math.min(maxChunk, payload.length - at);
            int flags = (at == 0 ? Frame.FIRST : 0) | (at + n == payload.length ? Frame.LAST : 0);
            Frame.writeHeader(h, Frame.HEADER + n, messageId, (byte) 3, (byte) 4, flags, 0, payload.length);
            out.write(h, 0, h.length);
            out.write(payload, at, n);
            int pad = OutgoingRingBuffer.aligned(Frame.HEADER + n) - (Frame.HEADER + n);
            out.write(new byte[pad], 0, pad);
            at += n;
        } while (at < payload.length);
        return out.toByteArray();
    }

    @Test
    public void messagesSurviveASplitAtEveryOffset() throws ProtocolViolation {
        byte[] p = payload();
        // Two messages back to back, the second fragmented into 3 frames.
        ByteArrayOutputStream s = new ByteArrayOutputStream();
        byte[] a = frames(p, p.length, 1);
        byte[] b = frames(p, p.length / 3 + 1, 2);
        byte[] odd = {1, 2, 3, 4, 5, 6, 7}; // single frames with 1 byte of padding each
        byte[] c = frames(odd, odd.length, 3);
        s.write(a, 0, a.length);
        s.write(b, 0, b.length);
        s.write(c, 0, c.length);
        s.write(c, 0, c.length);
        byte[] stream = s.toByteArray();
        long mem = NativeBlocks.allocate(stream.length);
        try {
            for (int i = 0; i < stream.length; i++) {
                Memory.putByte(mem + i, stream[i]);
            }
            for (int split = 0; split <= stream.length; split++) {
                List<byte[]> got = new ArrayList<>();
                StreamAssembler asm = new StreamAssembler(9, 0, LIMITS);
                StreamAssembler.Sink sink = (src, type, sub, flags, req, base, offset, length) -> {
                    assertEquals(9, src);
                    assertEquals(3, type);
                    got.add(copy(base, offset, length));
                };
                asm.feed(mem, split, sink);
                asm.feed(mem + split, stream.length - split, sink);
                assertEquals("split at " + split, 4, got.size());
                assertArrayEquals(p, got.get(0));
                assertArrayEquals(p, got.get(1));
                assertArrayEquals(odd, got.get(2));
                assertArrayEquals(odd, got.get(3));
                Codec.checkSamplePayload(got.get(1));
            }
        } finally {
            NativeBlocks.free(mem);
        }
    }

    @Test
    public void interleavedFragmentsOfTwoMessagesAreReassembled() throws ProtocolViolation {
        byte[] p1 = new byte[100];
        byte[] p2 = new byte[70];
        for (int i = 0; i < 100; i++) {
            p1[i] = (byte) i;
        }
        for (int i = 0; i < 70; i++) {
            p2[i] = (byte) (200 - i);
        }
        byte[] f1 = frames(p1, 40, 11); // frames of 40, 40, 20 (multiples of 4: no padding)
        byte[] f2 = frames(p2, 50, 12); // frames of 50 (+2 padding), 20
        int h = Frame.HEADER;
        ByteArrayOutputStream s = new ByteArrayOutputStream();
        s.write(f1, 0, h + 40);                 // m11 part 1
        s.write(f2, 0, h + 52);                 // m12 part 1 with padding
        s.write(f1, h + 40, h + 40);            // m11 part 2
        s.write(f2, h + 52, h + 20);            // m12 part 2 (last)
        s.write(f1, 2 * (h + 40), h + 20);      // m11 part 3 (last)
        byte[] stream = s.toByteArray();
        long mem = NativeBlocks.allocate(stream.length);
        try {
            Memory.copy(stream, 0, mem, stream.length);
            List<byte[]> got = new ArrayList<>();
            new StreamAssembler(1, 0, LIMITS).feed(mem, stream.length, (src, t, st, fl, r, b, o, n) -> got.add(copy(b, o, n)));
            assertEquals(2, got.size());
            assertArrayEquals(p2, got.get(0));
            assertArrayEquals(p1, got.get(1));
        } finally {
            NativeBlocks.free(mem);
        }
    }

    /** A {@link Frame#SKIP} frame of {@code payload} garbage bytes (and its padding). */
    static byte[] skipFrame(int payload) {
        byte[] f = new byte[OutgoingRingBuffer.aligned(Frame.HEADER + payload)];
        Frame.writeHeader(f, Frame.HEADER + payload, 0, (byte) 0, (byte) 0, Frame.SKIP, 0, 0);
        for (int i = Frame.HEADER; i < f.length; i++) {
            f[i] = (byte) (0xA5 + i); // garbage, as a failed in-place export leaves it
        }
        return f;
    }

    /**
     * Skip frames (a failed in-place serialisation) between messages and
     * between the fragments of one are dropped, whatever the buffer split;
     * a skip frame with any other flag or the reserved byte set is a violation.
     */
    @Test
    public void skipFramesAreDroppedWhereverTheyStandAndWhateverTheSplit() throws ProtocolViolation {
        byte[] p = payload();
        byte[] a = frames(p, p.length, 1);
        byte[] b = frames(p, p.length / 2 + 1, 2); // two fragments
        int firstFragment = OutgoingRingBuffer.aligned(Frame.HEADER + p.length / 2 + 1);
        byte[] skip = skipFrame(33);
        ByteArrayOutputStream s = new ByteArrayOutputStream();
        s.write(skip, 0, skip.length);
        s.write(a, 0, a.length);
        s.write(b, 0, firstFragment);
        s.write(skip, 0, skip.length);
        s.write(b, firstFragment, b.length - firstFragment);
        byte[] empty = skipFrame(0);
        s.write(empty, 0, empty.length);
        byte[] stream = s.toByteArray();
        long mem = NativeBlocks.allocate(stream.length);
        try {
            Memory.copy(stream, 0, mem, stream.length);
            for (int split = 0; split <= stream.length; split++) {
                List<byte[]> got = new ArrayList<>();
                StreamAssembler asm = new StreamAssembler(9, 0, LIMITS);
                StreamAssembler.Sink sink = (src, type, sub, flags, req, base, offset, length) -> got.add(copy(base, offset, length));
                asm.feed(mem, split, sink);
                asm.feed(mem + split, stream.length - split, sink);
                assertEquals("split at " + split, 2, got.size());
                assertArrayEquals(p, got.get(0));
                assertArrayEquals(p, got.get(1));
            }
            for (int bad : new int[] {Frame.SKIP | Frame.FIRST | Frame.LAST, Frame.SKIP | Frame.LAST, Frame.SKIP | Frame.REQUEST}) {
                byte[] f = skipFrame(8);
                f[10] = (byte) bad;
                assertViolation(f, "flags");
            }
            byte[] f = skipFrame(8);
            f[11] = 1;
            assertViolation(f, "reserved");
        } finally {
            NativeBlocks.free(mem);
        }
    }

    private static void assertViolation(byte[] frame, String what) {
        long mem = NativeBlocks.allocate(frame.length);
        try {
            Memory.copy(frame, 0, mem, frame.length);
            new StreamAssembler(9, 0, LIMITS).feed(mem, frame.length, (src, t, st, fl, r, b, o, n) -> {
                throw new AssertionError("a message from a bad skip frame");
            });
            throw new AssertionError("no violation for flags 0x" + Integer.toHexString(frame[10] & 0xFF));
        } catch (ProtocolViolation expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains(what));
        } finally {
            NativeBlocks.free(mem);
        }
    }

    /** The sink's bytes, copied out (native ones are valid only during the call). */
    static byte[] copy(byte[] array, long at, int length) {
        byte[] out = new byte[length];
        if (array != null) {
            System.arraycopy(array, (int) at, out, 0, length);
        } else {
            Memory.copy(at, out, 0, length);
        }
        return out;
    }
}
