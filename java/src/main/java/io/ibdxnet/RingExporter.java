package io.ibdxnet;

import io.ibdxnet.transport.RingRecord;
import java.util.Objects;

/**
 * The exporter of a message whose size is known ({@link Message#payloadSize}):
 * writes the payload straight into the frame reserved for it in a send ring
 * ({@link RingRecord}), no buffer, no copy. Every write is checked against
 * the declared size first: one beyond it is an {@link IllegalStateException},
 * nothing is written, and the exporter remembers it (a message that catches
 * the exception is refused all the same).
 */
final class RingExporter extends MessageExporter {
    private RingRecord record;
    /** Offset of the payload in the record (the frame header's size). */
    private int base;
    /** The declared payload size. */
    private int limit;
    private int pos;
    private boolean overflowed;

    /** Writes {@code limit} bytes at {@code base} of {@code r} from now on. */
    void wrap(RingRecord r, int base, int limit) {
        this.record = r;
        this.base = base;
        this.limit = limit;
        this.pos = 0;
        this.overflowed = false;
    }

    /** Drops the record (it is published). */
    void release() {
        record = null;
    }

    boolean overflowed() {
        return overflowed;
    }

    /** The record offset for the next {@code n} bytes. */
    private int claim(int n) {
        int at = pos;
        if (n > limit - at) {
            overflowed = true;
            throw new IllegalStateException("the message writes more than the " + limit
                    + " bytes its payloadSize() declared");
        }
        pos = at + n;
        return base + at;
    }

    @Override
    public void writeByte(byte v) {
        record.putByte(claim(1), v);
    }

    @Override
    public void writeShort(short v) {
        record.putShort(claim(2), v);
    }

    @Override
    public void writeInt(int v) {
        record.putInt(claim(4), v);
    }

    @Override
    public void writeLong(long v) {
        record.putLong(claim(8), v);
    }

    @Override
    public void writeBytes(byte[] v, int offset, int length) {
        Objects.checkFromIndexSize(offset, length, v.length);
        record.put(claim(length), v, offset, length);
    }

    @Override
    void reset() {
        pos = 0;
    }

    @Override
    int size() {
        return pos;
    }

    @Override
    byte[] array() {
        throw new IllegalStateException("a ring exporter has no array");
    }
}
