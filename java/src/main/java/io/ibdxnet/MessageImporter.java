package io.ibdxnet;

import io.ibdxnet.memory.Memory;
import java.nio.charset.StandardCharsets;

/**
 * Reads a payload written by {@link MessageExporter}; reading past the end
 * is an error. The bytes are read where they are: in a {@code byte[]} or, for
 * a message that arrived whole in one receive buffer, straight from the
 * buffer's native memory (valid only while the importer is used, during
 * {@link Message#importPayload}).
 */
public final class MessageImporter {
    private byte[] array;
    private long offset;
    private int end;
    private int pos;

    MessageImporter(byte[] buf, int length) {
        this(buf, 0, length);
    }

    /** Over {@code length} bytes at index {@code at} of {@code array} (null: at native address {@code at}). */
    MessageImporter(byte[] array, long at, int length) {
        reset(array, at, length);
    }

    /** Reads another payload (the coordinator reuses one importer for every message). */
    MessageImporter reset(byte[] array, long at, int length) {
        this.array = array;
        this.offset = at;
        this.end = length;
        this.pos = 0;
        return this;
    }

    private byte byteAt(long a) {
        return array != null ? array[(int) a] : Memory.getByte(a);
    }

    private long at(int n) {
        // long: pos + n must not wrap around for a length a peer made up.
        if (n < 0 || (long) pos + n > end) {
            throw new IllegalStateException("message payload too short: need " + n + " bytes at " + pos + " of " + end);
        }
        long a = offset + pos;
        pos += n;
        return a;
    }

    /**
     * Reads one byte.
     *
     * @return the byte
     */
    public byte readByte() {
        return byteAt(at(1));
    }

    /**
     * Reads a boolean (one byte, non-zero is true).
     *
     * @return the boolean
     */
    public boolean readBoolean() {
        return readByte() != 0;
    }

    /**
     * Reads a big-endian short.
     *
     * @return the short
     */
    public short readShort() {
        long a = at(2);
        return (short) ((byteAt(a) & 0xFF) << 8 | (byteAt(a + 1) & 0xFF));
    }

    /**
     * Reads a big-endian int.
     *
     * @return the int
     */
    public int readInt() {
        long a = at(4);
        int v = 0;
        for (int i = 0; i < 4; i++) {
            v = v << 8 | (byteAt(a + i) & 0xFF);
        }
        return v;
    }

    /**
     * Reads a big-endian long.
     *
     * @return the long
     */
    public long readLong() {
        long a = at(8);
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = v << 8 | (byteAt(a + i) & 0xFF);
        }
        return v;
    }

    /**
     * Reads a double (its IEEE 754 bits as a long).
     *
     * @return the double
     */
    public double readDouble() {
        return Double.longBitsToDouble(readLong());
    }

    /**
     * {@code n} elements of {@code size} bytes each, checked against what is
     * left before anything is allocated: a length a peer made up never costs
     * more memory than the payload it sent.
     */
    private int fits(int n, int size, String what) {
        if (n < 0 || (long) n * size > remaining()) {
            throw new IllegalStateException("message payload too short for " + n + " " + what + ": " + remaining()
                    + " bytes left at " + pos + " of " + end);
        }
        return n;
    }

    /**
     * Reads a length-prefixed byte array ({@link MessageExporter#writeByteArray}).
     *
     * @return a new array
     */
    public byte[] readByteArray() {
        int n = fits(readInt(), 1, "bytes");
        long a = at(n);
        byte[] v = new byte[n];
        if (array != null) {
            System.arraycopy(array, (int) a, v, 0, n);
        } else {
            Memory.copy(a, v, 0, n);
        }
        return v;
    }

    /**
     * Reads {@code length} raw bytes (no length prefix) into {@code v} at {@code offset}: the counterpart of {@link MessageExporter#writeBytes}.
     *
     * @param v the array
     * @param offset where to put them in it
     * @param length how many
     */
    public void readBytes(byte[] v, int offset, int length) {
        if (offset < 0 || length < 0 || offset > v.length - length) {
            throw new IndexOutOfBoundsException("readBytes: " + length + " bytes at " + offset + " into a byte[" + v.length + "]");
        }
        long a = at(length);
        if (array != null) {
            System.arraycopy(array, (int) a, v, offset, length);
        } else {
            Memory.copy(a, v, offset, length);
        }
    }

    /**
     * Reads {@code length} raw bytes (no length prefix) into a new array.
     *
     * @param length how many
     * @return a new array
     */
    public byte[] readBytes(int length) {
        if (length < 0) {
            throw new IllegalArgumentException("readBytes: negative length " + length);
        }
        byte[] v = new byte[fits(length, 1, "bytes")];
        readBytes(v, 0, length);
        return v;
    }

    /**
     * Reads a length-prefixed int array.
     *
     * @return a new array
     */
    public int[] readIntArray() {
        int n = fits(readInt(), 4, "ints");
        int[] v = new int[n];
        for (int i = 0; i < n; i++) {
            v[i] = readInt();
        }
        return v;
    }

    /**
     * Reads a length-prefixed long array.
     *
     * @return a new array
     */
    public long[] readLongArray() {
        int n = fits(readInt(), 8, "longs");
        long[] v = new long[n];
        for (int i = 0; i < n; i++) {
            v[i] = readLong();
        }
        return v;
    }

    /**
     * Reads a length-prefixed UTF-8 string.
     *
     * @return the string
     */
    public String readString() {
        return new String(readByteArray(), StandardCharsets.UTF_8);
    }

    /**
     * Bytes not yet read.
     *
     * @return their number
     */
    public int remaining() {
        return end - pos;
    }
}
