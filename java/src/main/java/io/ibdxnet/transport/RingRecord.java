package io.ibdxnet.transport;

/**
 * A record reserved in a connection's outgoing ring by
 * {@link Transport#reserve}, written in place by the thread that reserved it,
 * then handed to {@link Transport#publish} — exactly once, also when writing
 * failed: the send side's walk stops at an unpublished record, so one left
 * behind would stall the connection. Offsets count from the record's start;
 * bytes 0..3 are the length word, stored by publish. Every write is checked
 * against the reserved length (an {@link IndexOutOfBoundsException}, nothing
 * written) and wraps around the ring's end. Reusable: one per sending thread.
 */
public final class RingRecord {
    private RingConnection connection;
    private OutgoingRingBuffer orb;
    private long start;
    private int length;

    void reserved(RingConnection c, long start, int length) {
        this.connection = c;
        this.orb = c.orb;
        this.start = start;
        this.length = length;
    }

    void clear() {
        connection = null;
        orb = null;
        length = 0;
    }

    /** The connection whose ring holds the record (for the transport's publish); null when none is reserved. */
    public RingConnection connection() {
        return connection;
    }

    /** Ring position of byte 0. */
    long start() {
        return start;
    }

    /** The reserved length (header included, alignment padding excluded); 0 when none is reserved. */
    public int length() {
        return length;
    }

    public void putByte(int offset, byte v) {
        check(offset, 1);
        orb.putByte(start + offset, v);
    }

    /** Big-endian, like everything in a frame. */
    public void putShort(int offset, short v) {
        check(offset, 2);
        orb.putShort(start + offset, v);
    }

    /** Big-endian. */
    public void putInt(int offset, int v) {
        check(offset, 4);
        orb.putInt(start + offset, v);
    }

    /** Big-endian. */
    public void putLong(int offset, long v) {
        check(offset, 8);
        orb.putLong(start + offset, v);
    }

    /** Copies {@code src[srcOffset, srcOffset + n)} to {@code offset}. */
    public void put(int offset, byte[] src, int srcOffset, int n) {
        check(offset, n);
        java.util.Objects.checkFromIndexSize(srcOffset, n, src.length);
        orb.write(start + offset, src, srcOffset, n);
    }

    private void check(int offset, int n) {
        if (offset < 4 || n < 0 || offset > length - n) {
            throw new IndexOutOfBoundsException(n + " bytes at " + offset + " of a record of " + length
                    + " (bytes 0..3 are the ring's)");
        }
    }
}
