package io.ibdxnet;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.core.Frame;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.OutgoingRingBuffer;
import io.ibdxnet.transport.RingConnection;
import io.ibdxnet.transport.RingRecord;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The in-place exporter over a real ring: the bytes, the wrap-around, the bounds. */
public class RingExporterTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final long FOREVER = System.nanoTime() + 3_600_000_000_000L;

    private static RingConnection connection(long mem, int capacity) {
        return new RingConnection(1, new OutgoingRingBuffer(mem, capacity), new FlowWindow(1L << 40, 1)) {};
    }

    /**
     * The sample payload (every type the exporter writes) serialised in place
     * at every start offset of a ring, so that each primitive and array is cut
     * by the ring's end somewhere: the published frame is byte for byte the
     * header and what the heap exporter writes.
     */
    @Test
    public void writesWhatTheHeapExporterWritesWhereverTheRingWraps() throws Exception {
        byte[] expected = Codec.samplePayload();
        int frame = Frame.HEADER + expected.length;
        int capacity = 256;
        long mem = NativeBlocks.allocate(capacity);
        try {
            for (int shift = 0; shift < capacity; shift += OutgoingRingBuffer.ALIGN) {
                Memory.fill(mem, capacity, (byte) 0);
                RingConnection c = connection(mem, capacity);
                if (shift > 0) { // move the ring's front to shift
                    long p = c.orb.reserve(shift, FOREVER);
                    c.orb.publish(p, shift);
                    c.orb.posted(c.orb.readyToPost());
                    c.orb.confirmed(shift);
                }
                RingRecord r = new RingRecord();
                assertTrue(c.reserve(frame, FOREVER, false, r));
                RingExporter out = new RingExporter();
                out.wrap(r, Frame.HEADER, expected.length);
                Codec.writeSample(out);
                assertEquals(expected.length, out.size());
                assertFalse(out.overflowed());
                Frame.writeHeader(r, 77, (byte) 3, (byte) 4, Frame.FIRST | Frame.LAST, 5, expected.length);
                c.publish(r);
                assertEquals(0, c.writers.get());
                assertEquals(OutgoingRingBuffer.aligned(frame), c.orb.readyToPost());
                byte[] got = c.orb.copyStranded();
                byte[] header = new byte[Frame.HEADER];
                Frame.writeHeader(header, frame, 77, (byte) 3, (byte) 4, Frame.FIRST | Frame.LAST, 5, expected.length);
                assertArrayEquals("header at shift " + shift, header, Arrays.copyOf(got, Frame.HEADER));
                byte[] payload = Arrays.copyOfRange(got, Frame.HEADER, frame);
                assertArrayEquals("payload at shift " + shift, expected, payload);
                Codec.checkSamplePayload(payload);
            }
        } finally {
            NativeBlocks.free(mem);
        }
    }

    /** A write past the declared size throws, writes nothing, and is remembered; the record's neighbours stay untouched. */
    @Test
    public void writingBeyondTheDeclaredSizeIsRefusedAndWritesNothing() throws Exception {
        int capacity = 64;
        long mem = NativeBlocks.allocate(capacity);
        try {
            RingConnection c = connection(mem, capacity);
            RingRecord r = new RingRecord();
            int declared = 10;
            assertTrue(c.reserve(Frame.HEADER + declared, FOREVER, false, r));
            RingExporter out = new RingExporter();
            out.wrap(r, Frame.HEADER, declared);
            out.writeLong(-1L);
            for (Runnable tooMuch : new Runnable[] {() -> out.writeInt(-1), () -> out.writeBytes(new byte[] {-1, -1, -1}, 0, 3),
                    () -> out.writeString("é"), () -> out.writeLong(-1)}) {
                try {
                    tooMuch.run();
                    fail("wrote past the declared size");
                } catch (IllegalStateException expected) {
                    assertTrue(expected.getMessage(), expected.getMessage().contains("payloadSize() declared"));
                }
                assertEquals(8, out.size());
            }
            assertTrue(out.overflowed());
            out.writeShort((short) -1); // exactly fills it
            assertEquals(declared, out.size());
            for (int i = Frame.HEADER + declared; i < capacity; i++) {
                assertEquals("byte " + i + " beyond the record", 0, Memory.getByte(mem + i));
            }
            try {
                out.writeBytes(new byte[4], 2, 3);
                fail("source range not checked");
            } catch (IndexOutOfBoundsException expected) {
                // the array's bounds, before anything else
            }
            c.publish(r);
            assertEquals(0, c.writers.get());
        } finally {
            NativeBlocks.free(mem);
        }
    }

    /** The record itself refuses the ring's length word, anything past its end, and everything once published. */
    @Test
    public void aRecordIsBoundedByItsReservation() throws Exception {
        int capacity = 64;
        long mem = NativeBlocks.allocate(capacity);
        try {
            RingConnection c = connection(mem, capacity);
            RingRecord r = new RingRecord();
            assertTrue(c.reserve(24, FOREVER, false, r));
            assertEquals(24, r.length());
            assertEquals(c, r.connection());
            expectOutOfBounds(() -> r.putInt(0, 1));
            expectOutOfBounds(() -> r.putByte(3, (byte) 1));
            expectOutOfBounds(() -> r.putInt(21, 1));
            expectOutOfBounds(() -> r.putLong(17, 1));
            expectOutOfBounds(() -> r.put(20, new byte[5], 0, 5));
            r.putInt(20, 0x01020304);
            assertEquals(0x04, Memory.getByte(mem + 23));
            c.publish(r);
            assertEquals(0, r.length());
            expectOutOfBounds(() -> r.putByte(4, (byte) 1));
        } finally {
            NativeBlocks.free(mem);
        }
    }

    private static void expectOutOfBounds(Runnable write) {
        try {
            write.run();
            fail("write out of the record's bounds");
        } catch (IndexOutOfBoundsException expected) {
            // nothing written
        }
    }

    /** {@link MessageExporter#stringSize} is what writeString writes, surrogates (paired or not) included. */
    @Test
    public void stringSizeMatchesWhatWriteStringWrites() {
        for (String s : new String[] {"", "abc", "grüße ✓", "\uD83D\uDE00", "\uD83D", "x\uDE00y", "\uD83D\uD83D\uDE00", "\u07FF\u0800"}) {
            MessageExporter out = new MessageExporter(16);
            out.writeString(s);
            assertEquals(s, out.size(), MessageExporter.stringSize(s));
            assertEquals(s, s.getBytes(StandardCharsets.UTF_8).length + 4, MessageExporter.stringSize(s));
        }
    }
}
