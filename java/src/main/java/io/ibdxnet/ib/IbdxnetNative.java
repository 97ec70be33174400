package io.ibdxnet.ib;

/**
 * The natives of libibdxnet (registered in JNI_OnLoad). Handles are opaque;
 * use {@link NativeEngine} rather than calling these directly.
 */
final class IbdxnetNative {
    private IbdxnetNative() {}

    static {
        NativeLibrary.loadLibrary();
        NativeLog.start();
    }

    /** Nothing: calling it initialises this class, which loads the library ({@link NativeLibrary#load}). */
    static void ensureLoaded() {}

    /**
     * The native contract, one item a line: "Name size align field:offset:size ..."
     * per shared struct, then "const NAME value" per constant.
     */
    static native String layouts();

    /** Every configuration key with its default, as key=value lines. */
    static native String defaultConfig();

    /** Checks key=value lines as {@link #create} would, starting nothing; an IllegalArgumentException names the key. */
    static native void checkConfig(String config);

    /** {@code checkEveryUpcall}: see {@link NativeEngine#checkEveryUpcall()}. */
    static native long create(String config, EngineCallbacks callbacks, boolean checkEveryUpcall) throws IbException;

    static native void destroy(long handle);

    static native int localPort(long handle);

    /** The host's RDMA devices as fabric {@code auto} sees them, one name a line (empty: none). */
    static native String rdmaDevices() throws IbException;

    static native String fabricName(long handle);

    static native void addNode(long handle, int nodeId, String host, int port);

    static native boolean removeNode(long handle, int nodeId);

    /**
     * Connects (or takes the established connection) and takes one handle on
     * it: {@code {send ring address, connection id}} of that one connection.
     */
    static native long[] connect(long handle, int nodeId, int timeoutMs) throws IbException;

    static native int ringSize(long handle);

    /**
     * Address of the send thread's {@code IbdxnetSleepWord}: 1 while it sleeps, 2 while it is
     * awake and idle, 0 while it works (read it before {@link #sendFromCaller}). Valid for the
     * life of the process, also after {@link #destroy}.
     */
    static native long sendSleepWord(long handle);

    /** Wakes the native send thread if it sleeps. */
    static native void wakeSendThread(long handle);

    /**
     * After publishing data, when the send thread's word is not 0: posts it on this thread (the
     * send thread is idle or asleep: no wake-up), or leaves it to the send thread (busy, or
     * {@code bytes} above {@code send_from_caller_max_bytes}). Makes the send up-call
     * ({@link EngineCallbacks#nextDataToSend}) on this thread.
     */
    static native void sendFromCaller(long handle, int bytes);

    /**
     * This thread starts waiting for a response and polls the receive side itself
     * ({@link #receiveFromCaller}) until {@link #receiveEnd}; the receive thread sleeps
     * meanwhile. False with {@code recv_from_caller=false} (then nothing to end).
     */
    static native boolean receiveBegin(long handle);

    /**
     * One receive iteration on this thread: the work it did (>= 0; {@link
     * EngineCallbacks#received} came on this thread if data was there), -1 while another thread
     * runs the receive work, -2 once the engine stopped.
     */
    static native int receiveFromCaller(long handle);

    /** The waiting ends, once per true {@link #receiveBegin}. */
    static native void receiveEnd(long handle);

    static native void closeConnection(long handle, int nodeId, boolean force);

    /** Closes the connection to {@code nodeId} at once if its queue pair is {@code qpn}; true if it was. */
    static native boolean closeQueuePair(long handle, int nodeId, int qpn);

    /** Before shutting down: what our Leave to {@code nodeId} says we handled of its queue pair {@code qpn}. */
    static native void setHandledOnLeave(long handle, int nodeId, int qpn, long bytes);

    static native long peerFlowUnit(long handle, int nodeId, int qpn);

    /** True while connection {@code connectionId} (one we hold) is established. */
    static native boolean connectionOpen(long handle, int connectionId);

    /** Drops Java's handle on connection {@code connectionId}; closes nothing. */
    static native void releaseConnection(long handle, int connectionId);

    /** The constants RETURN_BUFFER_OK, _UNKNOWN or _NOT_IN_USE (see {@link NativeLayout}). */
    static native int returnBuffer(long handle, int bufferId);

    /** What is not in the counters table, as key=value lines. */
    static native String stats(long handle);

    /** The engine's counters table (see {@link NativeCounters}); valid after {@code destroy} too. */
    static native long countersAddress(long handle);

    /**
     * The calling thread drains the native log from now on, at {@code level}
     * (0 off, 1 error … 5 trace) and more severe; false if the records stay on
     * stderr ({@code RUST_LOG} is set, or the process has another logger).
     */
    static native boolean logStart(int level);

    /** The most verbose level (as for {@link #logStart}) the native log hands to Java. */
    static native void logLevel(int level);

    /**
     * Up to a batch of native log records, waiting up to {@code waitMs} for the
     * first: {@code level, logger, message} per record.
     */
    static native String[] logDrain(int waitMs);

    /** The logger names the library logs on, one a line. */
    static native String logTargets();
}
