package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import java.lang.management.ManagementFactory;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** A payload that lies about its own lengths fails its import; nothing is read past its end. */
public class MessageImporterTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    /** {@code length} bytes of native memory starting with the big-endian int {@code first}. */
    private static long nativePayload(int first, int length) {
        long mem = NativeBlocks.allocate(length);
        Memory.fill(mem, length, (byte) 0);
        for (int i = 0; i < 4; i++) {
            Memory.putByte(mem + i, (byte) (first >>> (24 - 8 * i)));
        }
        return mem;
    }

    @Test
    public void lengthsNearTwoToTheThirtyOneAreRefusedWithoutReading() {
        // pos + n overflowed int before: 4 + 0x7FFFFFFD wrapped negative and passed the check.
        for (int lie : new int[] {0x7FFFFFFF, 0x7FFFFFFD, 0x7FFFFFFC, Integer.MIN_VALUE, -1, 5}) {
            long mem = nativePayload(lie, 8);
            try {
                MessageImporter in = new MessageImporter(null, mem, 8);
                try {
                    in.readByteArray();
                    fail("a byte array of " + lie + " bytes read from 4");
                } catch (IllegalStateException expected) {
                    assertEquals(4, in.remaining()); // the length was read, nothing after it
                }
                in = new MessageImporter(null, mem, 8);
                try {
                    in.readString();
                    fail("a string of " + lie + " bytes read from 4");
                } catch (IllegalStateException expected) {
                    // refused
                }
                in = new MessageImporter(null, mem, 8);
                try {
                    in.readLongArray();
                    fail("a long array of " + lie + " elements read from 4");
                } catch (IllegalStateException expected) {
                    // refused
                }
            } finally {
                NativeBlocks.free(mem);
            }
        }
    }

    /** Bytes this thread allocated so far (HotSpot's per-thread counter). */
    private static long allocated() {
        return ((com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean()).getCurrentThreadAllocatedBytes();
    }

    /** Reads a raw byte count the payload gives (as a message with its own length field would). */
    @Test
    public void readBytesChecksTheLengthBeforeItAllocates() {
        byte[] payload = new byte[24];
        MessageImporter in = new MessageImporter(payload, payload.length);
        in.readInt();
        long before = allocated();
        try {
            in.readBytes(Integer.MAX_VALUE - 8);
            fail("read 2 GiB from a 24-byte payload");
        } catch (IllegalStateException expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("too short for 2147483639 bytes: 20 bytes left"));
        }
        long bytes = allocated() - before;
        assertTrue("a refused readBytes allocated " + bytes + " bytes", bytes < 1 << 20);
        assertEquals("nothing was read", 20, in.remaining());
        assertEquals(20, in.readBytes(20).length); // what is there can be read
    }

    /**
     * Every public read of the importer, on a payload whose every length is
     * a lie (0x7F7F7F7F) and with that lie as any int argument, allocates less
     * than 1 MiB: no read allocates for more than the payload holds (a new
     * read method is covered without changing this test).
     */
    @Test
    public void noReadAllocatesMoreThanThePayloadHolds() throws Exception {
        int lie = 0x7F7F7F7F;
        byte[] payload = new byte[64];
        Arrays.fill(payload, (byte) 0x7F);
        int checked = 0;
        for (Method m : MessageImporter.class.getDeclaredMethods()) {
            if (!Modifier.isPublic(m.getModifiers()) || Modifier.isStatic(m.getModifiers())) {
                continue;
            }
            Class<?>[] types = m.getParameterTypes();
            Object[] args = new Object[types.length];
            for (int i = 0; i < types.length; i++) {
                assertTrue(m + ": a parameter type this test does not know", types[i] == int.class || types[i] == byte[].class);
                args[i] = types[i] == int.class ? (Object) lie : new byte[16];
            }
            MessageImporter in = new MessageImporter(payload, payload.length);
            long before = allocated();
            try {
                m.invoke(in, args);
            } catch (InvocationTargetException e) {
                assertTrue(m + " threw " + e.getCause(), e.getCause() instanceof RuntimeException);
            }
            long bytes = allocated() - before;
            assertTrue(m + " allocated " + bytes + " bytes for a 64-byte payload", bytes < 1 << 20);
            checked++;
        }
        assertTrue("only " + checked + " methods", checked >= 12);
    }

    /** 4 bytes of payload saying 0x7FFFFFF0 bytes follow; its import reads them with readBytes(int). */
    public static final class Liar extends Message {
        public Liar() {
            super((byte) 9, (byte) 1);
        }

        Liar(int dest) {
            super(dest, (byte) 9, (byte) 1);
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeInt(0x7FFFFFF0);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            in.readBytes(in.readInt());
        }
    }

    /** 200 lying messages over loopback are dropped in well under a second each (2 GiB were allocated for each). */
    @Test
    public void lyingMessagesAreDroppedWithoutAllocating() throws Exception {
        java.util.logging.Logger log = java.util.logging.Logger.getLogger(DXNet.class.getName());
        java.util.logging.Level level = log.getLevel();
        log.setLevel(java.util.logging.Level.SEVERE); // 200 warnings with stack traces are not this test's subject
        DXNet[] n = new DXNet[2];
        try {
            for (int i = 0; i < 2; i++) {
                DXNetConfig c = new DXNetConfig(i);
                c.transport = "loopback";
                n[i] = DXNet.start(c);
                n[i].registerMessageType((byte) 9, (byte) 1, Liar.class);
                n[i].register((byte) 9, (byte) 1, m -> fail("a lying message was delivered"));
            }
            n[0].addNode(1, "127.0.0.1:" + n[1].localPort());
            n[1].addNode(0, "127.0.0.1:" + n[0].localPort());
            long t0 = System.nanoTime();
            for (int i = 0; i < 200; i++) {
                n[0].sendMessage(new Liar(1));
            }
            TestSupport.waitFor("200 dropped", 120_000, () -> n[1].droppedMessages() == 200);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            System.out.println("MessageImporterTest: 200 lying messages dropped in " + ms + " ms");
            assertTrue("200 lying messages took " + ms + " ms", ms < 2_000);
        } finally {
            log.setLevel(level);
            for (DXNet d : n) {
                if (d != null) {
                    d.close();
                }
            }
        }
    }
}
