package io.ibdxnet;

import java.nio.charset.StandardCharsets;

/** Reads a payload written by {@link MessageExporter}; reading past the end is an error. */
public final class MessageImporter {
    private final byte[] buf;
    private final int end;
    private int pos;

    MessageImporter(byte[] buf, int length) {
        this.buf = buf;
        this.end = length;
    }

    private void need(int n) {
        if (n < 0 || pos + n > end) {
            throw new IllegalStateException("message payload too short: need " + n + " bytes at " + pos + " of " + end);
        }
    }

    public byte readByte() {
        need(1);
        return buf[pos++];
    }

    public boolean readBoolean() {
        return readByte() != 0;
    }

    public short readShort() {
        need(2);
        short v = (short) ((buf[pos] & 0xFF) << 8 | (buf[pos + 1] & 0xFF));
        pos += 2;
        return v;
    }

    public int readInt() {
        need(4);
        int v = 0;
        for (int i = 0; i < 4; i++) {
            v = v << 8 | (buf[pos++] & 0xFF);
        }
        return v;
    }

    public long readLong() {
        need(8);
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = v << 8 | (buf[pos++] & 0xFF);
        }
        return v;
    }

    public double readDouble() {
        return Double.longBitsToDouble(readLong());
    }

    public byte[] readByteArray() {
        int n = readInt();
        need(n);
        byte[] v = new byte[n];
        System.arraycopy(buf, pos, v, 0, n);
        pos += n;
        return v;
    }

    public int[] readIntArray() {
        int n = readInt();
        need(n * 4);
        int[] v = new int[n];
        for (int i = 0; i < n; i++) {
            v[i] = readInt();
        }
        return v;
    }

    public long[] readLongArray() {
        int n = readInt();
        need(n * 8);
        long[] v = new long[n];
        for (int i = 0; i < n; i++) {
            v[i] = readLong();
        }
        return v;
    }

    public String readString() {
        return new String(readByteArray(), StandardCharsets.UTF_8);
    }

    /** Bytes not yet read. */
    public int remaining() {
        return end - pos;
    }
}
