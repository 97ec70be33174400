package io.ibdxnet;

import java.io.IOException;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Configuration of a {@link DXNet} instance. Every key — its type, default,
 * range and meaning — is defined once, in {@link #KEYS}; each has a public
 * field of the same name (a new instance holds the defaults). Files
 * ({@link #load}) are JSON or {@code key=value} lines: these keys, the node
 * table ({@code "nodes": {"id": "host:port"}} or {@code node.<id>=host:port})
 * and native engine keys ({@code "native": {...}} or {@code native.<key>=value},
 * into {@link #nativeConfig}). The keys marked in {@link ConfigKey#nativeKey}
 * set their native key too ({@code connectTimeoutMs} sets
 * {@code native.connect_timeout_ms}); giving both with different values is an
 * error naming both.
 */
public final class DXNetConfig {
    /** Transports {@link #transport} can name. */
    public static final List<String> TRANSPORTS = ConfigKeyTable.TRANSPORTS;

    /**
     * Key {@code nodeId}: this node's id. Sets the native engine's {@code node_id}. Type: integer;
     * default: {@code 0}; range: [0, 65534].
     */
    public int nodeId;
    /**
     * Key {@code transport}: {@code auto}: {@code ib} when the host has an RDMA device (or
     * {@code native.fabric} names one), else {@code nio}, logged at start; {@code ib}: the native
     * engine; {@code nio}: TCP; {@code loopback}: nodes of this JVM only. Type: auto, ib, nio,
     * loopback; default: {@code auto}.
     */
    public String transport;
    /**
     * Key {@code listen}: where this node listens; empty: all interfaces, the port of its own node
     * table entry, else any port. Sets the native engine's {@code listen}. Type: host:port or
     * empty; default: none.
     */
    public String listen;
    /**
     * Key {@code maxConnections}: open outgoing connections; the least recently used idle one is
     * closed for a new one. Sets the native engine's {@code max_connections}. Type: integer;
     * default: {@code 100}; range: [1, 65534].
     */
    public int maxConnections;
    /**
     * Key {@code handlerThreads}: message handler threads. Type: integer; default: {@code 2};
     * range: [1, 1024].
     */
    public int handlerThreads;
    /**
     * Key {@code orderPerSender}: handle one source node's messages one at a time in arrival order
     * (different nodes in parallel); false: any handler thread takes any message. Type: true or
     * false; default: {@code true}.
     */
    public boolean orderPerSender;
    /**
     * Key {@code handlerQueueSize}: received batches not yet handled, all sources together; a
     * source with none queued may always queue one. Type: integer; default: {@code 16384}; range:
     * [1, 2^31-1].
     */
    public int handlerQueueSize;
    /**
     * Key {@code receiveInline}: a transport's receiving thread turns a received buffer into
     * messages itself while nothing waits for the coordinator (a round trip crosses one thread
     * hand-off less per side; messages' importPayload then runs on that thread); false: always the
     * coordinator. Type: true or false; default: {@code true}.
     */
    public boolean receiveInline;
    /**
     * Key {@code handleOnReceivingThread}: where a buffer is taken inline ({@code receiveInline})
     * and none of its source's messages waits for the handler pool, the receiving thread runs their
     * handlers itself (one thread hand-off less; for short handlers: nothing else is received
     * meanwhile), except what a thread waiting in {@code sendSync} receives (ib's
     * {@code recv_from_caller}): the pool handles that. There {@code sendSync} throws
     * IllegalStateException and a send that would wait for ring or window room is deferred like an
     * async send; false: always the handler pool. Type: true or false; default: {@code false}.
     */
    public boolean handleOnReceivingThread;
    /**
     * Key {@code requestTimeoutMs}: default request timeout. Type: integer; default: {@code 10000};
     * range: [1, 86400000].
     */
    public int requestTimeoutMs;
    /**
     * Key {@code statsIntervalMs}: log the node's counters (core and transport, as its MBeans show
     * them) on the System.Logger {@code io.ibdxnet.stats} at INFO this often; 0: never. Type:
     * integer; default: {@code 0}; range: [0, 3600000].
     */
    public int statsIntervalMs;
    /**
     * Key {@code handlerQueueBytes}: payload bytes (plus 64 per message) of received messages not
     * yet handled, all sources together; a source with nothing queued may always queue one buffer's
     * messages. Type: integer; default: {@code 67108864}; range: [1024, 1099511627776].
     */
    public long handlerQueueBytes;
    /**
     * Key {@code handlerQueueBytesPerSource}: … of one source node; a source over it is not read
     * (its flow-control window is not confirmed) until its handlers catch up. Type: integer;
     * default: {@code 8388608}; range: [1024, 1099511627776].
     */
    public long handlerQueueBytesPerSource;
    /**
     * Key {@code sendTimeoutMs}: how long a send may wait for ring space or the flow-control
     * window. Type: integer; default: {@code 10000}; range: [1, 86400000].
     */
    public int sendTimeoutMs;
    /**
     * Key {@code handlerSendTimeoutMs}: … for a send or reply made on a message handler thread (at
     * most {@code sendTimeoutMs}): a peer that does not read holds a handler no longer. Type:
     * integer; default: {@code 1000}; range: [1, 86400000].
     */
    public int handlerSendTimeoutMs;
    /**
     * Key {@code maxDeferredBytesPerNode}: async requests that cannot go out at once (no connection
     * yet, ring or window full) wait per destination, serialised, up to this many bytes; beyond,
     * {@code sendAsync}'s future fails at once with {@code OVERLOADED}. One request alone may
     * always wait, as may the rest of one partly sent. Type: integer; default: {@code 33554432};
     * range: [0, 1099511627776].
     */
    public long maxDeferredBytesPerNode;
    /**
     * Key {@code connectTimeoutMs}: connection setup timeout. Sets the native engine's
     * {@code connect_timeout_ms}. Type: integer; default: {@code 10000}; range: [1, 86400000].
     */
    public int connectTimeoutMs;
    /**
     * Key {@code helloTimeoutMs}: nio: an incoming connection's handshake (its hello, and the key's
     * proof) must end within this, and within {@code connectTimeoutMs}; until then it holds one of
     * its address's 4 handshake slots. Type: integer; default: {@code 2000}; range: [1, 86400000].
     */
    public int helloTimeoutMs;
    /**
     * Key {@code flowControlWindow}: flow control window per connection, bytes (paper Table 2: 16
     * MB); may differ between nodes: each sender names its unit (window × threshold, in [64, 2^62])
     * when a connection is set up and the receiver confirms in it. Type: integer; default:
     * {@code 16777216}; range: [4096, 2^63-1].
     */
    public long flowControlWindow;
    /**
     * Key {@code flowControlThreshold}: the receiver confirms each time this share of our window
     * was handled; may differ between nodes, as flowControlWindow. Type: number; default:
     * {@code 0.1}; range: (0, 1].
     */
    public double flowControlThreshold;
    /**
     * Key {@code ibqMaxBuffers}: incoming buffers queued at most (a reference each is allocated at
     * start). Type: integer; default: {@code 8192}; range: [1, 1048576].
     */
    public int ibqMaxBuffers;
    /**
     * Key {@code ibqMaxBytes}: incoming bytes queued at most. Type: integer; default:
     * {@code 134217728}; range: [1, 2^63-1].
     */
    public long ibqMaxBytes;
    /**
     * Key {@code ibqMaxBuffersPerSource}: … of one source node (at most {@code ibqMaxBuffers}, and
     * an eighth of the transport's receive buffers: {@code nioBufferCount}, ib's
     * {@code recv_buffer_count}); ib: the receive buffers one source may hold, beyond them its data
     * is copied out. Type: integer; default: {@code 1024}; range: [1, 1048576].
     */
    public int ibqMaxBuffersPerSource;
    /**
     * Key {@code ibqMaxBytesPerSource}: … of one source node (at most {@code ibqMaxBytes}). Type:
     * integer; default: {@code 33554432}; range: [1, 1099511627776].
     */
    public long ibqMaxBytesPerSource;
    /**
     * Key {@code nioBufferSize}: nio, loopback: bytes of one pooled receive buffer; the pool
     * ({@code nioBufferCount} × this, at most 16 GiB and within the JVM's direct memory limit)
     * allocates 16 buffers at start and more only while all are lent out. Type: integer; default:
     * {@code 65536}; range: [4096, 67108864].
     */
    public int nioBufferSize;
    /**
     * Key {@code nioBufferCount}: nio, loopback: pooled receive buffers. Type: integer; default:
     * {@code 512}; range: [2, 1048576].
     */
    public int nioBufferCount;
    /**
     * Key {@code nioRingSize}: nio, loopback: outgoing ring per connection, bytes, at most:
     * resident only where written and given back once the ring was empty for a second (JDK 22+ with
     * the jar: a private mapping; JDK 17–21: an unlinked file in /dev/shm, committed 16 KiB to 1
     * MiB at a time; without a tmpfs with room for it, direct memory, resident in full from the
     * connection's start). Type: integer; default: {@code 4194304}; range: a power of two in [8192,
     * 1073741824].
     */
    public int nioRingSize;
    /**
     * Key {@code keepAliveMs}: nio: an idle connection sends a keep-alive after this long. Type:
     * integer; default: {@code 1000}; range: [1, 86400000].
     */
    public int keepAliveMs;
    /**
     * Key {@code idleTimeoutMs}: nio: a connection that received nothing for this long has failed;
     * more than {@code keepAliveMs}. Type: integer; default: {@code 10000}; range: [2, 86400000].
     */
    public int idleTimeoutMs;
    /**
     * Key {@code maxMessageSize}: largest message payload this node sends or accepts (a larger one
     * is a protocol violation). Type: integer; default: {@code 67108864}; range: [1024, 2^31-1].
     */
    public int maxMessageSize;
    /**
     * Key {@code maxUnfinishedBytesPerConnection}: bytes unfinished multi-frame messages of one
     * connection may claim; at least {@code maxMessageSize}. Type: integer; default:
     * {@code 268435456}; range: [1024, 2^63-1].
     */
    public long maxUnfinishedBytesPerConnection;
    /**
     * Key {@code maxUnfinishedBytes}: … of all connections together; at least
     * {@code maxUnfinishedBytesPerConnection}. Type: integer; default: {@code 1073741824}; range:
     * [1024, 2^63-1].
     */
    public long maxUnfinishedBytes;
    /**
     * Key {@code checkPeerAddress}: nio: accept a hello only from the IP address the node table
     * gives for the node it claims to be. Type: true or false; default: {@code true}.
     */
    public boolean checkPeerAddress;
    /**
     * Key {@code authKeyFile}: file holding the pre-shared key (owner-only); empty:
     * {@code IBDXNET_AUTH_KEY}, else no key. With a key only nodes with the same key are accepted.
     * Sets the native engine's {@code auth_key_file}. Type: path or empty; default: none.
     */
    public String authKeyFile;
    /** Node table: id → "host:port" (nio: where it listens; ib: its connection manager). */
    public final Map<Integer, String> nodes = new LinkedHashMap<>();
    /** Native engine settings (key → value), e.g. "fabric" → "sim"; the README lists the keys. */
    public final Map<String, String> nativeConfig = new LinkedHashMap<>();

    /** The file this configuration came from (errors name it), or null. */
    private Path source;
    /** Keys a file gave (a native key contradicting one of them is an error even when it holds the default). */
    private final Set<String> given = new HashSet<>();

    /** Every key: name, type, default, range, meaning (the README's table is generated from it). */
    public static final List<ConfigKey> KEYS = ConfigKeyTable.KEYS;

    /**
     * The defaults of {@link #KEYS} for node {@code nodeId}.
     *
     * @param nodeId this node's id
     */
    public DXNetConfig(int nodeId) {
        for (ConfigKey k : KEYS) {
            k.set(this, k.defaultText);
        }
        this.nodeId = nodeId;
    }

    /**
     * The key named {@code name}, or null.
     *
     * @param name the key's name
     * @return the key, or null
     */
    public static ConfigKey key(String name) {
        for (ConfigKey k : KEYS) {
            if (k.name.equals(name)) {
                return k;
            }
        }
        return null;
    }

    /**
     * Reads a configuration file: JSON if the name ends in {@code .json}
     * (<code>{"nodeId": 0, "nodes": {"1": "host:port"}, "native": {"fabric": "sim"}, ...}</code>),
     * else key=value lines. Unknown keys are errors; every error names the file and the key.
     * A key the file does not give keeps its default ({@code nodeId}: 0); for a
     * file that all nodes share, see {@link #load(Path, int)}.
     *
     * @param file the file
     * @return the configuration
     * @throws IOException if the file cannot be read
     * @throws IllegalArgumentException if a key is unknown or a value invalid (the message names the file and key)
     */
    public static DXNetConfig load(Path file) throws IOException {
        DXNetConfig c = new DXNetConfig(0);
        c.source = file;
        Map<String, String> entries = ConfigFiles.read(file);
        for (Map.Entry<String, String> e : entries.entrySet()) {
            try {
                c.set(e.getKey(), e.getValue());
            } catch (IllegalArgumentException ex) {
                throw new IllegalArgumentException(file + ": " + ex.getMessage(), ex);
            }
        }
        return c;
    }

    /**
     * Reads a configuration file as {@link #load(Path)} does, for node
     * {@code nodeId}: the id comes from the caller (a command line, say), so
     * one file with the whole node table serves every node; a {@code nodeId}
     * the file gives is overridden.
     *
     * @param file the file
     * @param nodeId this node's id
     * @return the configuration
     * @throws IOException if the file cannot be read
     * @throws IllegalArgumentException if a key is unknown or a value invalid (the message names the file and key;
     *     ranges, {@code nodeId}'s too, are checked by {@link #validate})
     */
    public static DXNetConfig load(Path file, int nodeId) throws IOException {
        DXNetConfig c = load(file);
        try {
            c.set("nodeId", Integer.toString(nodeId));
        } catch (IllegalArgumentException ex) {
            throw new IllegalArgumentException(file + ": " + ex.getMessage(), ex);
        }
        return c;
    }

    /** Sets one key from its text form; the message names the key and the value. */
    private void set(String key, String v) {
        if (key.startsWith("node.")) {
            int id;
            try {
                id = Integer.parseInt(key.substring(5));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(key + ": '" + key.substring(5) + "' is not a node id");
            }
            nodes.put(id, v.trim());
        } else if (key.startsWith("native.")) {
            nativeConfig.put(key.substring(7), v.trim());
        } else {
            ConfigKey k = key(key);
            if (k == null) {
                throw new IllegalArgumentException("unknown configuration key '" + key + "'"
                        + ConfigKeyTable.suggestion(key));
            }
            k.set(this, v);
            given.add(key);
        }
    }

    /**
     * The file {@link #load} read, or null.
     *
     * @return the path, or null
     */
    public Path source() {
        return source;
    }

    /**
     * Checks every key's range, then the rules relating keys; the message
     * names the key, its value and (for a loaded configuration) the file.
     */
    public void validate() {
        try {
            for (ConfigKey k : KEYS) {
                k.check(this);
            }
            if (idleTimeoutMs <= keepAliveMs) {
                throw new IllegalArgumentException("idleTimeoutMs = " + idleTimeoutMs + " must be more than keepAliveMs = "
                        + keepAliveMs);
            }
            long unit = io.ibdxnet.transport.Confirmations.unit(flowControlWindow, flowControlThreshold);
            if (!io.ibdxnet.transport.Confirmations.acceptable(unit)) {
                // Peers refuse such a unit (they would confirm every few bytes, or overflow).
                throw new IllegalArgumentException("flowControlWindow × flowControlThreshold = " + flowControlWindow + " × "
                        + flowControlThreshold + " = " + unit + " bytes must be in [" + io.ibdxnet.transport.Confirmations.MIN_UNIT
                        + ", " + io.ibdxnet.transport.Confirmations.MAX_UNIT + "]: raise the threshold or the window");
            }
            if (flowControlWindow - unit < 64) {
                // Up to a unit can stay unconfirmed: frames must fit beside it (FlowWindow.largestFrame).
                throw new IllegalArgumentException("flowControlThreshold = " + flowControlThreshold + " leaves "
                        + (flowControlWindow - unit) + " bytes of the " + flowControlWindow
                        + "-byte flowControlWindow for a frame; lower the threshold or raise the window");
            }
            if ((long) nioBufferCount * nioBufferSize > ConfigKeyTable.MAX_POOL_BYTES) {
                throw new IllegalArgumentException("nioBufferCount × nioBufferSize = " + nioBufferCount + " × " + nioBufferSize
                        + " = " + (long) nioBufferCount * nioBufferSize + " bytes, the receive pool's largest size, must be at most "
                        + ConfigKeyTable.MAX_POOL_BYTES + " (16 GiB)");
            }
            if (maxUnfinishedBytesPerConnection < maxMessageSize) {
                throw new IllegalArgumentException("maxUnfinishedBytesPerConnection = " + maxUnfinishedBytesPerConnection
                        + " must be at least maxMessageSize = " + maxMessageSize);
            }
            if (maxUnfinishedBytes < maxUnfinishedBytesPerConnection) {
                throw new IllegalArgumentException("maxUnfinishedBytes = " + maxUnfinishedBytes
                        + " must be at least maxUnfinishedBytesPerConnection = " + maxUnfinishedBytesPerConnection);
            }
            for (Map.Entry<Integer, String> n : nodes.entrySet()) {
                if (n.getKey() < 0 || n.getKey() > 0xFFFE) {
                    throw new IllegalArgumentException("node." + n.getKey() + ": not a node id in [0, 65534]");
                }
                String why = ConfigKey.addressError(n.getValue());
                if (why != null) {
                    throw new IllegalArgumentException("node." + n.getKey() + " = '" + n.getValue() + "' " + why);
                }
            }
            nativeSettings(); // a native key contradicting its Java key
            if (transport.equals("nio") || transport.equals("auto") || authKeyFile != null) {
                io.ibdxnet.transport.AuthKey.load(authKeyFile); // the file's permissions and the key's length
            }
        } catch (IllegalArgumentException e) {
            throw source == null ? e : new IllegalArgumentException(source + ": " + e.getMessage(), e);
        }
    }

    /**
     * The native engine's settings: {@link #nativeConfig}, with the native
     * keys of {@link ConfigKey#nativeKey} set from their Java keys and the
     * node table. A native key that contradicts its Java key (one a file gave
     * or that is not at its default) is an error naming both.
     *
     * @param listen the listen address the transport chose when {@link #listen} is empty
     * @return native key to value
     */
    public Map<String, String> nativeSettings(String listen) {
        Map<String, String> out = new LinkedHashMap<>(nativeConfig);
        for (ConfigKey k : KEYS) {
            if (k.nativeKey == null) {
                continue;
            }
            String mine = k.text(this);
            String theirs = nativeConfig.get(k.nativeKey);
            boolean set = !k.isDefault(this) || given.contains(k.name) || k.name.equals("nodeId");
            if (theirs != null && set && !theirs.trim().equals(mine)) {
                throw new IllegalArgumentException(k.name + " = '" + mine + "' and native." + k.nativeKey + " = '"
                        + theirs.trim() + "' contradict each other: " + k.name + " sets native." + k.nativeKey
                        + "; give only " + k.name);
            }
            if (theirs == null && !mine.isEmpty()) {
                out.put(k.nativeKey, mine);
            }
        }
        if (!out.containsKey("listen") && listen != null) {
            out.put("listen", listen);
        }
        // The node table goes in before the engine reads its first packet: a
        // peer's packets sent while this node starts are not dropped as foreign.
        for (Map.Entry<Integer, String> n : nodes.entrySet()) {
            if (n.getKey() != nodeId) {
                out.putIfAbsent("node." + n.getKey(), n.getValue());
            }
        }
        return out;
    }

    private void nativeSettings() {
        nativeSettings(null);
    }

    /**
     * The README's table of these keys (Markdown).
     *
     * @return the table
     */
    public static String markdownTable() {
        return ConfigKeyTable.markdownTable();
    }
}
