package io.ibdxnet;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** Writes a message payload (big-endian primitives, length-prefixed arrays and strings). */
public final class MessageExporter {
    private byte[] buf;
    private int pos;

    public MessageExporter(int initialCapacity) {
        buf = new byte[Math.max(16, initialCapacity)];
    }

    private void need(int n) {
        if (pos + n > buf.length) {
            buf = Arrays.copyOf(buf, Math.max(buf.length * 2, pos + n));
        }
    }

    public void writeByte(byte v) {
        need(1);
        buf[pos++] = v;
    }

    public void writeBoolean(boolean v) {
        writeByte((byte) (v ? 1 : 0));
    }

    public void writeShort(short v) {
        need(2);
        buf[pos++] = (byte) (v >>> 8);
        buf[pos++] = (byte) v;
    }

    public void writeInt(int v) {
        need(4);
        for (int s = 24; s >= 0; s -= 8) {
            buf[pos++] = (byte) (v >>> s);
        }
    }

    public void writeLong(long v) {
        need(8);
        for (int s = 56; s >= 0; s -= 8) {
            buf[pos++] = (byte) (v >>> s);
        }
    }

    public void writeDouble(double v) {
        writeLong(Double.doubleToRawLongBits(v));
    }

    /** Writes the length, then the bytes. */
    public void writeByteArray(byte[] v) {
        writeInt(v.length);
        writeBytes(v, 0, v.length);
    }

    /** Writes raw bytes (no length). */
    public void writeBytes(byte[] v, int offset, int length) {
        need(length);
        System.arraycopy(v, offset, buf, pos, length);
        pos += length;
    }

    public void writeIntArray(int[] v) {
        writeInt(v.length);
        for (int x : v) {
            writeInt(x);
        }
    }

    public void writeLongArray(long[] v) {
        writeInt(v.length);
        for (long x : v) {
            writeLong(x);
        }
    }

    /** UTF-8 with a length prefix. */
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
