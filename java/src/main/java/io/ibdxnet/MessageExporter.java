package io.ibdxnet;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Writes a message payload (big-endian primitives, length-prefixed arrays and
 * strings). This class writes into a growing heap buffer; the library's own
 * subclass (the only one) writes a message of known size
 * ({@link Message#payloadSize}) straight into a send ring.
 */
public sealed class MessageExporter permits RingExporter {
    private byte[] buf;
    private int pos;

    /**
     * A growing buffer, first {@code initialCapacity} bytes (at least 16).
     *
     * @param initialCapacity the first buffer size in bytes
     */
    public MessageExporter(int initialCapacity) {
        buf = new byte[Math.max(16, initialCapacity)];
    }

    /** For {@link RingExporter}, which has no buffer of its own. */
    MessageExporter() {
        buf = null;
    }

    /**
     * The bytes {@link #writeString} writes for {@code s}: its length prefix and UTF-8 bytes (for {@link Message#payloadSize}).
     *
     * @param s the string
     * @return the bytes
     */
    public static int stringSize(String s) {
        return 4 + utf8Length(s);
    }

    /** UTF-8 bytes of {@code s} as {@link String#getBytes} encodes it (an unpaired surrogate becomes one '?'). */
    static int utf8Length(String s) {
        int n = 0;
        for (int i = 0, len = s.length(); i < len; i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                n += 1;
            } else if (c < 0x800) {
                n += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < len && Character.isLowSurrogate(s.charAt(i + 1))) {
                n += 4;
                i++;
            } else if (Character.isSurrogate(c)) {
                n += 1;
            } else {
                n += 3;
            }
        }
        return n;
    }

    private void need(int n) {
        if (pos + n > buf.length) {
            buf = Arrays.copyOf(buf, Math.max(buf.length * 2, pos + n));
        }
    }

    /**
     * Writes one byte.
     *
     * @param v the value
     */
    public void writeByte(byte v) {
        need(1);
        buf[pos++] = v;
    }

    /**
     * Writes a boolean as one byte (1 or 0).
     *
     * @param v the value
     */
    public void writeBoolean(boolean v) {
        writeByte((byte) (v ? 1 : 0));
    }

    /**
     * Writes a big-endian short.
     *
     * @param v the value
     */
    public void writeShort(short v) {
        need(2);
        buf[pos++] = (byte) (v >>> 8);
        buf[pos++] = (byte) v;
    }

    /**
     * Writes a big-endian int.
     *
     * @param v the value
     */
    public void writeInt(int v) {
        need(4);
        for (int s = 24; s >= 0; s -= 8) {
            buf[pos++] = (byte) (v >>> s);
        }
    }

    /**
     * Writes a big-endian long.
     *
     * @param v the value
     */
    public void writeLong(long v) {
        need(8);
        for (int s = 56; s >= 0; s -= 8) {
            buf[pos++] = (byte) (v >>> s);
        }
    }

    /**
     * Writes a double (its IEEE 754 bits as a long).
     *
     * @param v the value
     */
    public void writeDouble(double v) {
        writeLong(Double.doubleToRawLongBits(v));
    }

    /**
     * Writes the length, then the bytes.
     *
     * @param v the bytes
     */
    public void writeByteArray(byte[] v) {
        writeInt(v.length);
        writeBytes(v, 0, v.length);
    }

    /**
     * Writes raw bytes (no length); read them with {@link MessageImporter#readBytes(byte[], int, int)}.
     *
     * @param v the array
     * @param offset where the bytes start in it
     * @param length how many
     */
    public void writeBytes(byte[] v, int offset, int length) {
        need(length);
        System.arraycopy(v, offset, buf, pos, length);
        pos += length;
    }

    /**
     * Writes the length, then the ints.
     *
     * @param v the ints
     */
    public void writeIntArray(int[] v) {
        writeInt(v.length);
        for (int x : v) {
            writeInt(x);
        }
    }

    /**
     * Writes the length, then the longs.
     *
     * @param v the longs
     */
    public void writeLongArray(long[] v) {
        writeInt(v.length);
        for (long x : v) {
            writeLong(x);
        }
    }

    /**
     * UTF-8 with a length prefix.
     *
     * @param s the string
     */
    public void writeString(String s) {
        writeByteArray(s.getBytes(StandardCharsets.UTF_8));
    }

    void reset() {
        pos = 0;
    }

    int size() {
        return pos;
    }

    byte[] array() {
        return buf;
    }
}
