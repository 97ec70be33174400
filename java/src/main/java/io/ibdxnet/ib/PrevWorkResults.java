package io.ibdxnet.ib;

import io.ibdxnet.memory.Memory;

/** Flyweight over the native {@code IbdxnetPrevWorkResults}: what happened to the last package. */
public final class PrevWorkResults {
    private static final NativeLayout.Struct S = NativeLayout.of("IbdxnetPrevWorkResults");
    private static final long NODE_ID = S.offset("node_id", 2);
    private static final long FC_POSTED = S.offset("fc_posted", 1);
    private static final long FC_NOT_POSTED = S.offset("fc_not_posted", 1);
    private static final long BYTES_POSTED = S.offset("bytes_posted", 4);
    private static final long BYTES_NOT_POSTED = S.offset("bytes_not_posted", 4);

    /** {@link #nodeId()} when there was no previous package: the id no node has. */
    public static final int NO_NODE = (int) NativeLayout.constant("NODE_ID_INVALID");

    private long address;

    public PrevWorkResults wrap(long address) {
        this.address = address;
        return this;
    }

    /** Node of the previous package, or {@link #NO_NODE} if there was none. */
    public int nodeId() {
        return Memory.getShort(address + NODE_ID) & 0xFFFF;
    }

    public int fcPosted() {
        return Memory.getByte(address + FC_POSTED) & 0xFF;
    }

    public int fcNotPosted() {
        return Memory.getByte(address + FC_NOT_POSTED) & 0xFF;
    }

    public long bytesPosted() {
        return Memory.getInt(address + BYTES_POSTED) & 0xFFFF_FFFFL;
    }

    public long bytesNotPosted() {
        return Memory.getInt(address + BYTES_NOT_POSTED) & 0xFFFF_FFFFL;
    }
}
