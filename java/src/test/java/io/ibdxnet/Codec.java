package io.ibdxnet;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;

/** Test helper: a payload with every type the exporter writes, and its check. */
public final class Codec {
    private Codec() {}

    public static byte[] samplePayload() {
        MessageExporter out = new MessageExporter(8);
        writeSample(out);
        return java.util.Arrays.copyOf(out.array(), out.size());
    }

    /** Writes the sample payload to {@code out}. */
    static void writeSample(MessageExporter out) {
        out.writeByte((byte) -7);
        out.writeBoolean(true);
        out.writeShort((short) -12345);
        out.writeInt(0xCAFEBABE);
        out.writeLong(Long.MIN_VALUE + 3);
        out.writeDouble(Math.PI);
        out.writeByteArray(new byte[] {1, 2, 3});
        out.writeIntArray(new int[] {-1, 0, Integer.MAX_VALUE});
        out.writeLongArray(new long[] {42L, -42L});
        out.writeString("grüße ✓");
    }

    public static void checkSamplePayload(byte[] p) {
        MessageImporter in = new MessageImporter(p, p.length);
        assertEquals(-7, in.readByte());
        assertEquals(true, in.readBoolean());
        assertEquals(-12345, in.readShort());
        assertEquals(0xCAFEBABE, in.readInt());
        assertEquals(Long.MIN_VALUE + 3, in.readLong());
        assertEquals(Math.PI, in.readDouble(), 0.0);
        assertArrayEquals(new byte[] {1, 2, 3}, in.readByteArray());
        assertArrayEquals(new int[] {-1, 0, Integer.MAX_VALUE}, in.readIntArray());
        assertArrayEquals(new long[] {42L, -42L}, in.readLongArray());
        assertEquals("grüße ✓", in.readString());
        assertEquals(0, in.remaining());
    }
}
