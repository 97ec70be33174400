package io.ibdxnet.ib;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One native msgrc engine (one node): its job, send and receive threads run
 * natively and call {@link EngineCallbacks}. Configuration keys and defaults
 * come from the native library ({@link #defaults()}); only the changes are given.
 */
public final class NativeEngine implements AutoCloseable {
    private long handle;
    private final int ringSize;

    private NativeEngine(long handle) {
        this.handle = handle;
        this.ringSize = IbdxnetNative.ringSize(handle);
    }

    /** Every configuration key with its native default. */
    public static Map<String, String> defaults() {
        Map<String, String> out = new LinkedHashMap<>();
        for (String line : IbdxnetNative.defaultConfig().split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                out.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        return out;
    }

    /**
     * The host's RDMA devices as the native fabric {@code auto} sees them
     * (empty: none). Loads the native library (an {@link UnsatisfiedLinkError}
     * if it cannot be loaded).
     */
    public static java.util.List<String> rdmaDevices() throws IbException {
        String names = IbdxnetNative.rdmaDevices();
        return names.isEmpty() ? java.util.Collections.emptyList() : java.util.Arrays.asList(names.split("\n"));
    }

    /** Starts an engine; {@code config} holds key=value overrides of {@link #defaults()}. */
    public static NativeEngine start(Map<String, String> config, EngineCallbacks callbacks) throws IbException {
        StringBuilder text = new StringBuilder();
        for (Map.Entry<String, String> e : config.entrySet()) {
            text.append(e.getKey()).append('=').append(e.getValue()).append('\n');
        }
        return new NativeEngine(IbdxnetNative.create(text.toString(), callbacks));
    }

    private long handle() {
        long h = handle;
        if (h == 0) {
            throw new IllegalStateException("engine is closed");
        }
        return h;
    }

    /** The UDP port of the connection manager. */
    public int localPort() {
        return IbdxnetNative.localPort(handle());
    }

    /** The device name (e.g. {@code rxe0}, {@code sim3}). */
    public String fabricName() {
        return IbdxnetNative.fabricName(handle());
    }

    public void addNode(int nodeId, String host, int port) {
        IbdxnetNative.addNode(handle(), nodeId, host, port);
    }

    public boolean removeNode(int nodeId) {
        return IbdxnetNative.removeNode(handle(), nodeId);
    }

    /** Connects (or returns the connection) to {@code nodeId}; the address of its send ring. */
    public long connect(int nodeId, int timeoutMs) throws IbException {
        return IbdxnetNative.connect(handle(), nodeId, timeoutMs);
    }

    /** Identifies the connection (and so the ring) {@link #connect} returned for {@code nodeId}; 0 if none. */
    public int connectionId(int nodeId) {
        return IbdxnetNative.localQpn(handle(), nodeId);
    }

    /** Bytes of every connection's send ring. */
    public int ringSize() {
        return ringSize;
    }

    /** Releases Java's handle on the connection and closes it. */
    public void closeConnection(int nodeId, boolean force) {
        IbdxnetNative.closeConnection(handle(), nodeId, force);
    }

    /**
     * Closes the connection to {@code nodeId} at once if its queue pair is
     * {@code qpn} (also one the peer opened); a newer connection stays.
     */
    public boolean closeQueuePair(int nodeId, int qpn) {
        return IbdxnetNative.closeQueuePair(handle(), nodeId, qpn);
    }

    /**
     * Before shutting down: of what {@code nodeId} sent on our queue pair
     * {@code qpn}, {@code bytes} were handled beyond the last flow-control
     * confirmation; the Leave to it says so (see {@link EngineCallbacks#EVENT_LEFT}).
     */
    public void setHandledOnLeave(int nodeId, int qpn, long bytes) {
        IbdxnetNative.setHandledOnLeave(handle(), nodeId, qpn, bytes);
    }

    /**
     * True while connection {@code connectionId} (one {@link #connect} returned
     * and not yet released) is established; false once it closed or failed.
     */
    public boolean connectionOpen(int connectionId) {
        return IbdxnetNative.connectionOpen(handle(), connectionId);
    }

    /**
     * Drops one of Java's handles on connection {@code connectionId} (after its close
     * event, once no Java thread touches its ring): the ring may be freed.
     */
    public void releaseConnection(int connectionId) {
        IbdxnetNative.releaseConnection(handle(), connectionId);
    }

    /** Returns a received buffer; any thread. */
    public void returnBuffer(int bufferId) {
        int r = IbdxnetNative.returnBuffer(handle(), bufferId);
        if (r != 0) {
            throw new IllegalArgumentException("receive buffer " + bufferId + (r == 1 ? " does not exist" : " was returned twice"));
        }
    }

    /** Native counters as key=value pairs. */
    public Map<String, Long> stats() {
        Map<String, Long> out = new LinkedHashMap<>();
        for (String line : IbdxnetNative.stats(handle()).split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                String v = line.substring(eq + 1);
                out.put(line.substring(0, eq), v.equals("true") ? 1L : v.equals("false") ? 0L : Long.parseLong(v));
            }
        }
        return out;
    }

    /** Stops the native threads and frees everything. */
    @Override
    public synchronized void close() {
        long h = handle;
        handle = 0;
        if (h != 0) {
            IbdxnetNative.destroy(h);
        }
    }
}
