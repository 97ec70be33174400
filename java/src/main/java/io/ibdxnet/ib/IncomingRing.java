package io.ibdxnet.ib;

import io.ibdxnet.memory.Memory;

/** Flyweight over the native incoming ring buffer handed to {@code received}. */
public final class IncomingRing {
    private static final NativeLayout.Struct HEADER = NativeLayout.of("IbdxnetIncomingRingHeader");
    private static final long USED = HEADER.offset("used", 4);
    private static final long FRONT = HEADER.offset("front", 4);
    private static final long SIZE = HEADER.offset("size", 4);
    private static final NativeLayout.Struct ENTRY = NativeLayout.of("IbdxnetIncomingEntry");
    private static final long SOURCE = ENTRY.offset("source_node_id", 2);
    private static final long FC_DATA = ENTRY.offset("fc_data", 1);
    private static final long LENGTH = ENTRY.offset("data_length", 4);
    private static final long BUFFER_ID = ENTRY.offset("buffer_id", 4);
    private static final long CONNECTION = ENTRY.offset("connection", 4);
    private static final long DATA = ENTRY.offset("data_address", 8);
    /** Buffer id of an entry that carries only flow-control data. */
    public static final int NO_BUFFER = (int) NativeLayout.constant("NO_BUFFER");

    private long address;
    /** Front and index mask, read once per up-call: the receive thread, which
     * alone changes them, is blocked in the up-call while Java reads (re-reading
     * them per field cost 9x on the FFM memory layer, bench/HISTORY.md). */
    private int front;
    private int mask;

    public IncomingRing wrap(long address) {
        this.address = address;
        this.front = Memory.getInt(address + FRONT);
        this.mask = Memory.getInt(address + SIZE) - 1;
        return this;
    }

    /** Valid entries, from the front. */
    public int used() {
        return Memory.getInt(address + USED);
    }

    private long entry(int i) {
        return address + HEADER.size + (long) ((front + i) & mask) * ENTRY.size;
    }

    public int sourceNodeId(int i) {
        return Memory.getShort(entry(i) + SOURCE) & 0xFFFF;
    }

    public int fcData(int i) {
        return Memory.getByte(entry(i) + FC_DATA) & 0xFF;
    }

    public int dataLength(int i) {
        return Memory.getInt(entry(i) + LENGTH);
    }

    public int bufferId(int i) {
        return Memory.getInt(entry(i) + BUFFER_ID);
    }

    /** The connection (local queue pair number) that delivered entry {@code i}. */
    public int connection(int i) {
        return Memory.getInt(entry(i) + CONNECTION);
    }

    public long dataAddress(int i) {
        return Memory.getLong(entry(i) + DATA);
    }
}
