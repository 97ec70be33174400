package io.ibdxnet.ib;

import io.ibdxnet.memory.Memory;

/** Flyweight over the native completion list: bytes and flow control confirmed per node and connection. */
public final class CompletedWorkList {
    private static final NativeLayout.Struct HEADER = NativeLayout.of("IbdxnetCompletedWorkList");
    private static final long COUNT = HEADER.offset("count", 4);
    private static final long SEQ = HEADER.offset("seq", 4);
    private static final long ACKED = HEADER.offset("acked", 4);
    private static final long PREV_APPLIED = HEADER.offset("prev_applied", 4);
    private static final NativeLayout.Struct ENTRY = NativeLayout.of("IbdxnetCompletedWork");
    private static final long NODE_ID = ENTRY.offset("node_id", 2);
    private static final long FC_DATA = ENTRY.offset("fc_data", 2);
    private static final long BYTES = ENTRY.offset("bytes", 4);
    private static final long CONNECTION = ENTRY.offset("connection", 4);

    private long address;

    public CompletedWorkList wrap(long address) {
        this.address = address;
        return this;
    }

    public int count() {
        return Memory.getInt(address + COUNT);
    }

    private long entry(int i) {
        return address + HEADER.size + (long) i * ENTRY.size;
    }

    public int nodeId(int i) {
        return Memory.getShort(entry(i) + NODE_ID) & 0xFFFF;
    }

    public int fcData(int i) {
        return Memory.getShort(entry(i) + FC_DATA) & 0xFFFF;
    }

    public long bytes(int i) {
        return Memory.getInt(entry(i) + BYTES) & 0xFFFF_FFFFL;
    }

    /**
     * Entry {@code i} is applied: its bytes and flow-control data become 0, so
     * the engine handing it again (after a failed call) applies nothing twice.
     */
    public void markApplied(int i) {
        long e = entry(i);
        Memory.putInt(e + BYTES, 0);
        Memory.putShort(e + FC_DATA, (short) 0);
    }

    /** The {@link PrevWorkResults} handed with this list are applied: the engine does not hand them again. */
    public void markPrevApplied() {
        Memory.putInt(address + PREV_APPLIED, Memory.getInt(address + SEQ));
    }

    /**
     * Everything of this hand-over is applied: the engine clears it. Until this
     * is written, the engine hands again what was not marked applied and posts
     * no package. Call it last in {@link EngineCallbacks#nextDataToSend}.
     */
    public void acknowledge() {
        Memory.putInt(address + ACKED, Memory.getInt(address + SEQ));
    }

    /** The connection whose ring the bytes were in ({@link NativeEngine.RingHandle#connectionId}). */
    public int connection(int i) {
        return Memory.getInt(entry(i) + CONNECTION);
    }
}
