package io.ibdxnet.ib;

import com.sun.management.HotSpotDiagnosticMXBean;
import io.ibdxnet.memory.Memory;
import java.lang.management.ManagementFactory;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One native msgrc engine (one node): its job, send and receive threads run
 * natively and call {@link EngineCallbacks}. Configuration keys and defaults
 * come from the native library ({@link #defaults()}); only the changes are given.
 */
public final class NativeEngine implements AutoCloseable {
    private static final int RETURN_BUFFER_OK = (int) NativeLayout.constant("RETURN_BUFFER_OK");
    private static final int RETURN_BUFFER_UNKNOWN = (int) NativeLayout.constant("RETURN_BUFFER_UNKNOWN");
    private static final int RETURN_BUFFER_NOT_IN_USE = (int) NativeLayout.constant("RETURN_BUFFER_NOT_IN_USE");
    /** Where the send thread's sleep word has its flag (the native layout says). */
    private static final long SLEEPING = NativeLayout.of("IbdxnetSleepWord").offset("sleeping", 4);
    private long handle;
    private final int ringSize;
    /** The send thread's sleep word: 0 while it works, else idle or asleep (see {@link #sendPublished}). */
    private final long sendSleepWord;
    /** The engine's counters, read in place (valid after close too). */
    private final NativeCounters counters;

    private NativeEngine(long handle) {
        this.handle = handle;
        this.ringSize = IbdxnetNative.ringSize(handle);
        this.sendSleepWord = IbdxnetNative.sendSleepWord(handle) + SLEEPING;
        this.counters = new NativeCounters(IbdxnetNative.countersAddress(handle), NativeLayout.counters());
    }

    /** The engine's counters table; readable after {@link #close()} (the last values). */
    public NativeCounters counters() {
        return counters;
    }

    /** The engine's receive buffers (the pool behind its shared receive queue). */
    public long receiveBuffers() {
        return counters.get(NativeCounters.RECEIVE_BUFFERS);
    }

    /**
     * After publishing data or write interest: while the native send thread
     * works this is one volatile read (it sees the data in its next
     * iteration); when it is idle or asleep, this thread runs the send work
     * itself and posts the data, a hand-off less (native
     * {@code send_from_caller}; with that key off it wakes the thread). The
     * native side's protocol (sys/doorbell.rs, msgrc/send_owner.rs) pairs
     * the read with the thread's announce-then-look, so nothing is left
     * unposted: the publishing write and this read are both volatile, hence
     * ordered. Runs {@link EngineCallbacks#nextDataToSend} on this thread:
     * call it holding no lock that method takes.
     *
     * @param bytes the record just published (0: flow control only); above
     *     the native {@code send_from_caller_max_bytes} the send thread posts
     *     it, in parallel with this thread's next record
     */
    public void sendPublished(int bytes) {
        // The word stays valid after close (the handle's never-freed slot keeps
        // it), so a close racing this read is harmless; the native call then
        // finds the engine closed, and a closed engine has no thread to wake.
        long h = handle;
        if (h != 0 && Memory.getIntVolatile(sendSleepWord) != 0) {
            try {
                IbdxnetNative.sendFromCaller(h, bytes);
            } catch (EngineClosedException e) {
                // raced close(): nothing to send any more
            }
        }
    }

    /**
     * This thread starts waiting (for a response) and will poll the receive side itself
     * ({@link #receiveOnCaller}); false if the engine does not let it ({@code recv_from_caller}
     * off, or closed): then nothing to end.
     */
    public boolean receiveBegin() {
        long h = handle;
        try {
            return h != 0 && IbdxnetNative.receiveBegin(h);
        } catch (EngineClosedException e) {
            return false;
        }
    }

    /** One receive iteration on this thread: see {@link IbdxnetNative#receiveFromCaller}. */
    public int receiveOnCaller() {
        long h = handle;
        try {
            return h == 0 ? -2 : IbdxnetNative.receiveFromCaller(h);
        } catch (EngineClosedException e) {
            return -2;
        }
    }

    /** Ends a {@link #receiveBegin} that returned true. */
    public void receiveEnd() {
        long h = handle;
        try {
            if (h != 0) {
                IbdxnetNative.receiveEnd(h);
            }
        } catch (EngineClosedException e) {
            // closed meanwhile: no thread to hand the watch back to
        }
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

    /**
     * Checks {@code config} (key=value overrides of {@link #defaults()}) with
     * the engine's own parser, ranges and cross-key rules, as {@link #start}
     * would, without starting anything.
     *
     * @throws IllegalArgumentException naming the key as {@code native.<key>}
     */
    public static void checkConfig(Map<String, String> config) {
        StringBuilder text = new StringBuilder();
        for (Map.Entry<String, String> e : config.entrySet()) {
            text.append(e.getKey()).append('=').append(e.getValue()).append('\n');
        }
        IbdxnetNative.checkConfig(text.toString());
    }

    /** Starts an engine; {@code config} holds key=value overrides of {@link #defaults()}. */
    public static NativeEngine start(Map<String, String> config, EngineCallbacks callbacks) throws IbException {
        // A library without an offset or constant we use fails here, by name: every reader of the layout.
        NativeLayout.requireAll(NodeEvents.class, NativeEngine.class, NextWorkPackage.class, PrevWorkResults.class,
                CompletedWorkList.class, IncomingRing.class, NativeCounters.class);
        StringBuilder text = new StringBuilder();
        for (Map.Entry<String, String> e : config.entrySet()) {
            text.append(e.getKey()).append('=').append(e.getValue()).append('\n');
        }
        return new NativeEngine(IbdxnetNative.create(text.toString(), callbacks, CheckEveryUpcall.VALUE));
    }

    /**
     * Whether the library checks for a Java exception after every up-call, not
     * only after one that returned 0 ({@link EngineCallbacks}). Only HotSpot is
     * known to return 0 when an exception escapes a JNI call, and {@code -Xcheck:jni}
     * ({@code CheckJNICalls}) warns about every call result that is not followed by
     * a check: on any other VM, or with that flag, every up-call is checked.
     * {@code -Dibdxnet.checkEveryUpcall=true|false} overrides the choice.
     */
    static boolean checkEveryUpcall() {
        return CheckEveryUpcall.VALUE;
    }

    /** Decided once, when the first engine starts (the management beans load then). */
    private static final class CheckEveryUpcall {
        static final boolean VALUE = decide();

        private static boolean decide() {
            String forced = System.getProperty("ibdxnet.checkEveryUpcall");
            if (forced != null) {
                return Boolean.parseBoolean(forced);
            }
            try {
                HotSpotDiagnosticMXBean hotspot = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
                return hotspot == null || !"false".equals(hotspot.getVMOption("CheckJNICalls").getValue());
            } catch (RuntimeException | LinkageError e) {
                return true; // not HotSpot, or no management modules: the safe way
            }
        }
    }

    private long handle() {
        long h = handle;
        if (h == 0) {
            throw new EngineClosedException();
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

    /** A connection's send ring and the id of that connection, obtained together. */
    public static final class RingHandle {
        /** Address of the connection's send ring ({@link #ringSize()} bytes). */
        public final long ringAddress;
        /**
         * Identifies the connection (its local queue pair number) in the shared
         * structs and to {@link #connectionOpen}, {@link #releaseConnection}.
         */
        public final int connectionId;

        RingHandle(long ringAddress, int connectionId) {
            this.ringAddress = ringAddress;
            this.connectionId = connectionId;
        }
    }

    /**
     * Connects (or takes the established connection) to {@code nodeId} and
     * takes one handle on it (give it back with {@link #releaseConnection}):
     * its send ring and id, of the same connection even if it is replaced meanwhile.
     */
    public RingHandle connect(int nodeId, int timeoutMs) throws IbException {
        long[] r = IbdxnetNative.connect(handle(), nodeId, timeoutMs);
        return new RingHandle(r[0], (int) r[1]);
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
     * confirmation; the Leave to it says so (see {@link NodeEvents#LEFT}).
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
     * The flow-control unit {@code nodeId} named for our connection
     * {@code connectionId} when it was set up (we confirm its bytes on it in
     * that unit); 0 if that is no longer the node's connection.
     */
    public long peerFlowUnit(int nodeId, int connectionId) {
        return IbdxnetNative.peerFlowUnit(handle(), nodeId, connectionId);
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
        if (r == RETURN_BUFFER_UNKNOWN) {
            throw new IllegalArgumentException("receive buffer " + bufferId + " does not exist");
        } else if (r == RETURN_BUFFER_NOT_IN_USE) {
            throw new IllegalArgumentException("receive buffer " + bufferId + " was returned twice");
        } else if (r != RETURN_BUFFER_OK) {
            throw new IllegalStateException("returnBuffer(" + bufferId + "): unknown result " + r + " (library and jar differ?)");
        }
    }

    /**
     * Native statistics by name: the counters table ({@link #counters()}),
     * then what the library computes when asked (connection manager, buffer
     * pool gauges, timers, up-call state) as key=value text.
     */
    public Map<String, Long> stats() {
        Map<String, Long> out = new LinkedHashMap<>();
        String rest = IbdxnetNative.stats(handle());
        counters.putAll(out);
        for (String line : rest.split("\n")) {
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
