package io.ibdxnet.ib;

/**
 * The natives of libibdxnet (registered in JNI_OnLoad). Handles are opaque;
 * use {@link NativeEngine} rather than calling these directly.
 */
final class IbdxnetNative {
    private IbdxnetNative() {}

    static {
        NativeLibrary.load();
    }

    /** One line per shared struct: "Name size align field:offset:size ...". */
    static native String layouts();

    /** Every configuration key with its default, as key=value lines. */
    static native String defaultConfig();

    static native long create(String config, EngineCallbacks callbacks) throws IbException;

    static native void destroy(long handle);

    static native int localPort(long handle);

    /** The host's RDMA devices as fabric {@code auto} sees them, one name a line (empty: none). */
    static native String rdmaDevices() throws IbException;

    static native String fabricName(long handle);

    static native void addNode(long handle, int nodeId, String host, int port);

    static native boolean removeNode(long handle, int nodeId);

    /** Returns the address of the connection's send ring. */
    static native long connect(long handle, int nodeId, int timeoutMs) throws IbException;

    static native int ringSize(long handle);

    /** Local QPN of the connection Java holds to {@code nodeId} (0 = none): identifies its ring. */
    static native int localQpn(long handle, int nodeId);

    static native void closeConnection(long handle, int nodeId, boolean force);

    /** Closes the connection to {@code nodeId} at once if its queue pair is {@code qpn}; true if it was. */
    static native boolean closeQueuePair(long handle, int nodeId, int qpn);

    /** Before shutting down: what our Leave to {@code nodeId} says we handled of its queue pair {@code qpn}. */
    static native void setHandledOnLeave(long handle, int nodeId, int qpn, long bytes);

    /** True while connection {@code connectionId} (one we hold) is established. */
    static native boolean connectionOpen(long handle, int connectionId);

    /** Drops Java's handle on connection {@code connectionId}; closes nothing. */
    static native void releaseConnection(long handle, int connectionId);

    /** 0 = returned, 1 = unknown buffer, 2 = returned twice. */
    static native int returnBuffer(long handle, int bufferId);

    static native String stats(long handle);
}
