package io.ibdxnet.ib;

import io.ibdxnet.memory.Memory;

/** Flyweight over the native {@code IbdxnetNextWorkPackage}, written in {@code nextDataToSend}. */
public final class NextWorkPackage {
    private static final NativeLayout.Struct S = NativeLayout.of("IbdxnetNextWorkPackage");
    private static final long NODE_ID = S.offset("node_id", 2);
    private static final long FC_DATA = S.offset("fc_data", 1);
    private static final long FLAGS = S.offset("flags", 1);
    private static final long OFFSET = S.offset("offset", 4);
    private static final long LENGTH = S.offset("length", 4);
    private static final long CONNECTION = S.offset("connection", 4);
    /** Bit 0 of flags: the package is valid. */
    public static final byte VALID = (byte) NativeLayout.constant("NWP_VALID");
    /** The largest flow-control count one package carries. */
    public static final int FC_DATA_MAX = (int) NativeLayout.constant("NWP_FC_DATA_MAX");
    /** A connection id no connection has: the package names none. */
    public static final int CONNECTION_NONE = (int) NativeLayout.constant("CONNECTION_NONE");

    private long address;

    public NextWorkPackage wrap(long address) {
        this.address = address;
        return this;
    }

    /**
     * Asks the engine to send {@code length} bytes at {@code offset} of the node's
     * send ring (wrapping at its end) and the flow-control value {@code fcData}.
     */
    public void set(int nodeId, int fcData, long offset, long length) {
        set(nodeId, fcData, offset, length, CONNECTION_NONE);
    }

    /**
     * As {@link #set(int, int, long, long)}, for the ring of connection
     * {@code connectionId} ({@link NativeEngine.RingHandle#connectionId}): if the node's
     * connection was replaced meanwhile, the engine posts nothing.
     */
    public void set(int nodeId, int fcData, long offset, long length, int connectionId) {
        Memory.putShort(address + NODE_ID, (short) nodeId);
        Memory.putByte(address + FC_DATA, (byte) fcData);
        Memory.putInt(address + OFFSET, (int) offset);
        Memory.putInt(address + LENGTH, (int) length);
        Memory.putInt(address + CONNECTION, connectionId);
        Memory.putByte(address + FLAGS, VALID);
    }
}
