package io.ibdxnet;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * Configuration of a {@link DXNet} instance. Native engine settings go into
 * {@link #nativeConfig} under the engine's own keys (defaults live in the
 * native library). Files ({@link #load}) are JSON or {@code key=value} lines:
 * the fields below by name, the node table ({@code "nodes": {"id": "host:port"}}
 * or {@code node.<id>=host:port}) and engine keys ({@code "native": {...}} or
 * {@code native.<key>=value}).
 */
public final class DXNetConfig {
    /** Transports {@link #transport} can name. */
    public static final java.util.List<String> TRANSPORTS = java.util.Arrays.asList("auto", "ib", "nio", "loopback");

    public int nodeId;
    /**
     * {@code auto} (the default): {@code ib} when the host has an RDMA device
     * (or {@link #nativeConfig} names a {@code fabric} other than {@code auto}),
     * otherwise {@code nio}; the choice and its reason are logged (INFO) when
     * the node starts. {@code ib}: the native InfiniBand engine (verbs, or the
     * in-process {@code sim} fabric without a device, which reaches nodes of
     * this process only); {@code nio}: TCP sockets; {@code loopback}: nodes in
     * this JVM only, through memory (no network; for tests and measuring the core).
     */
    public String transport = "auto";
    /** Where this node listens (nio and loopback): "host:port"; default: its own node table entry, else any port. */
    public String listen;
    /** Open outgoing connections at most; the least recently used idle one is closed for a new one. */
    public int maxConnections = 100;
    /** Node table: id → "host:port" of its connection manager. */
    public final Map<Integer, String> nodes = new LinkedHashMap<>();
    /** Message handler threads. */
    public int handlerThreads = 2;
    /**
     * True (default): the messages of one source node are handled one at a
     * time, in the order they arrived (for one sending thread: the order it
     * sent them), while messages of different source nodes are handled on
     * different handler threads at once. False: every handler thread may take
     * any message, so one sender's messages may be handled concurrently and
     * out of order (more parallelism for a single busy sender). Responses never
     * wait behind messages either way: they complete their request's future
     * as they arrive.
     */
    public boolean orderPerSender = true;
    /** Batches of received messages waiting for a handler; when full, receiving waits (backpressure). */
    public int handlerQueueSize = 16_384;
    /** Default request timeout. */
    public int requestTimeoutMs = 10_000;
    /** How long a send may wait for ring space or the flow-control window. */
    public int sendTimeoutMs = 10_000;
    /** Connection setup timeout. */
    public int connectTimeoutMs = 10_000;
    /** Flow control window per connection, bytes (paper Table 2: 16 MB). */
    public long flowControlWindow = 16L << 20;
    /** Confirm after this share of the window was received (Table 2: 0.1). */
    public double flowControlThreshold = 0.1;
    /** Incoming buffer queue limits (Table 2: 8192 buffers, 128 MB). */
    public int ibqMaxBuffers = 8192;
    public long ibqMaxBytes = 128L << 20;
    /** nio: bytes of one pooled receive buffer, and how many there are. */
    public int nioBufferSize = 64 << 10;
    public int nioBufferCount = 512;
    /** nio: outgoing ring per connection, bytes (a power of two). */
    public int nioRingSize = 4 << 20;
    /** nio: an idle connection sends a keep-alive after this long. */
    public int keepAliveMs = 1_000;
    /** nio: a connection that received nothing (not even a keep-alive) for this long has failed (half-open). */
    public int idleTimeoutMs = 10_000;
    /**
     * The largest message (payload bytes) this node sends or accepts; a peer
     * announcing a larger one violates the protocol (its connection is closed).
     */
    public int maxMessageSize = 64 << 20;
    /** Bytes that unfinished multi-frame messages of one connection may claim (a violation beyond). */
    public long maxUnfinishedBytesPerConnection = 256L << 20;
    /** Bytes that unfinished multi-frame messages of all connections together may claim. */
    public long maxUnfinishedBytes = 1L << 30;
    /**
     * nio: a hello is accepted only from an IP address the node table gives for
     * the node it claims to be (its host resolved when the node is added; a
     * wildcard entry such as 0.0.0.0 matches no peer).
     */
    public boolean checkPeerAddress = true;
    /**
     * A file holding the pre-shared key (only its owner may read or write it);
     * null: the environment variable {@code IBDXNET_AUTH_KEY}, else no key. With
     * a key, nio connections start with a mutual HMAC-SHA256 challenge–response
     * and only nodes with the same key are accepted ({@link io.ibdxnet.transport.AuthKey}).
     */
    public String authKeyFile;
    /** Native engine settings (key → value), e.g. "fabric" → "sim". */
    public final Map<String, String> nativeConfig = new LinkedHashMap<>();

    public DXNetConfig(int nodeId) {
        this.nodeId = nodeId;
    }

    /**
     * Reads a configuration file: JSON if the name ends in {@code .json}
     * (<code>{"nodeId": 0, "nodes": {"1": "host:port"}, "native": {"fabric": "sim"}, ...}</code>),
     * else key=value lines. Unknown keys are errors.
     */
    public static DXNetConfig load(Path file) throws IOException {
        if (file.getFileName().toString().endsWith(".json")) {
            return loadJson(file);
        }
        return loadProperties(file);
    }

    private static DXNetConfig loadJson(Path file) throws IOException {
        com.google.gson.JsonObject root;
        try (Reader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            root = com.google.gson.JsonParser.parseReader(r).getAsJsonObject();
        } catch (com.google.gson.JsonParseException | IllegalStateException e) {
            throw new IllegalArgumentException(file + ": not a JSON object: " + e.getMessage(), e);
        }
        if (!root.has("nodeId")) {
            throw new IllegalArgumentException(file + ": nodeId is missing");
        }
        DXNetConfig c = new DXNetConfig(root.get("nodeId").getAsInt());
        for (Map.Entry<String, com.google.gson.JsonElement> e : root.entrySet()) {
            String key = e.getKey();
            if (key.equals("nodes") || key.equals("native")) {
                for (Map.Entry<String, com.google.gson.JsonElement> inner : e.getValue().getAsJsonObject().entrySet()) {
                    c.setChecked(file, (key.equals("nodes") ? "node." : "native.") + inner.getKey(), inner.getValue().getAsString());
                }
            } else {
                c.setChecked(file, key, e.getValue().getAsString());
            }
        }
        return c;
    }

    private void setChecked(Path file, String key, String v) {
        try {
            set(key, v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(file + ": " + key + " = '" + v + "' is not a number");
        }
    }

    private static DXNetConfig loadProperties(Path file) throws IOException {
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            p.load(r);
        }
        String id = p.getProperty("nodeId");
        if (id == null) {
            throw new IllegalArgumentException(file + ": nodeId is missing");
        }
        DXNetConfig c = new DXNetConfig(Integer.parseInt(id.trim()));
        for (String key : Collections.list(p.propertyNames()).toArray(new String[0])) {
            c.setChecked(file, key, p.getProperty(key));
        }
        return c;
    }

    private void set(String key, String v) {
        if (key.startsWith("node.")) {
            nodes.put(Integer.parseInt(key.substring(5)), v);
        } else if (key.startsWith("native.")) {
            nativeConfig.put(key.substring(7), v);
        } else {
            switch (key) {
                case "nodeId": nodeId = Integer.parseInt(v); break;
                case "transport": transport = v; break;
                case "listen": listen = v; break;
                case "maxConnections": maxConnections = Integer.parseInt(v); break;
                case "nioBufferSize": nioBufferSize = Integer.parseInt(v); break;
                case "nioBufferCount": nioBufferCount = Integer.parseInt(v); break;
                case "nioRingSize": nioRingSize = Integer.parseInt(v); break;
                case "keepAliveMs": keepAliveMs = Integer.parseInt(v); break;
                case "idleTimeoutMs": idleTimeoutMs = Integer.parseInt(v); break;
                case "handlerThreads": handlerThreads = Integer.parseInt(v); break;
                case "orderPerSender": orderPerSender = parseBoolean(key, v); break;
                case "requestTimeoutMs": requestTimeoutMs = Integer.parseInt(v); break;
                case "sendTimeoutMs": sendTimeoutMs = Integer.parseInt(v); break;
                case "connectTimeoutMs": connectTimeoutMs = Integer.parseInt(v); break;
                case "flowControlWindow": flowControlWindow = Long.parseLong(v); break;
                case "flowControlThreshold": flowControlThreshold = Double.parseDouble(v); break;
                case "handlerQueueSize": handlerQueueSize = Integer.parseInt(v); break;
                case "ibqMaxBuffers": ibqMaxBuffers = Integer.parseInt(v); break;
                case "ibqMaxBytes": ibqMaxBytes = Long.parseLong(v); break;
                case "checkPeerAddress": checkPeerAddress = parseBoolean(key, v); break;
                case "authKeyFile": authKeyFile = v.isEmpty() ? null : v; break;
                case "maxMessageSize": maxMessageSize = Integer.parseInt(v); break;
                case "maxUnfinishedBytesPerConnection": maxUnfinishedBytesPerConnection = Long.parseLong(v); break;
                case "maxUnfinishedBytes": maxUnfinishedBytes = Long.parseLong(v); break;
                default: throw new IllegalArgumentException("unknown configuration key '" + key + "'");
            }
        }
    }

    private static boolean parseBoolean(String key, String v) {
        if (v.equals("true") || v.equals("false")) {
            return Boolean.parseBoolean(v);
        }
        throw new IllegalArgumentException(key + " = '" + v + "' is not true or false");
    }

    /**
     * The pre-shared key this node uses ({@link #authKeyFile}, else the
     * environment variable), or null; loading checks the file's permissions
     * and the key's length (errors name the file or variable).
     */
    public io.ibdxnet.transport.AuthKey authKey() {
        return io.ibdxnet.transport.AuthKey.load(authKeyFile);
    }

    /** Checks every field; the message names the field. */
    public void validate() {
        if (nodeId < 0 || nodeId > 0xFFFE) {
            throw new IllegalArgumentException("nodeId " + nodeId + " is not in 0..65534");
        }
        if (!TRANSPORTS.contains(transport)) {
            throw new IllegalArgumentException("transport '" + transport + "' is not one of " + TRANSPORTS);
        }
        if (listen != null && listen.lastIndexOf(':') < 1) {
            throw new IllegalArgumentException("listen = '" + listen + "' is not host:port");
        }
        if (maxConnections < 1) {
            throw new IllegalArgumentException("maxConnections must be at least 1");
        }
        if (nioBufferSize < 4096 || nioBufferCount < 2) {
            throw new IllegalArgumentException("nioBufferSize must be at least 4096 and nioBufferCount at least 2");
        }
        if (nioRingSize < 8192 || Integer.bitCount(nioRingSize) != 1) {
            throw new IllegalArgumentException("nioRingSize must be a power of two of at least 8192");
        }
        if (keepAliveMs <= 0 || idleTimeoutMs <= keepAliveMs) {
            throw new IllegalArgumentException("keepAliveMs must be positive and idleTimeoutMs larger than keepAliveMs");
        }
        if (handlerThreads < 1) {
            throw new IllegalArgumentException("handlerThreads must be at least 1");
        }
        if (handlerQueueSize < 1) {
            throw new IllegalArgumentException("handlerQueueSize must be at least 1");
        }
        if (requestTimeoutMs <= 0 || sendTimeoutMs <= 0 || connectTimeoutMs <= 0) {
            throw new IllegalArgumentException("requestTimeoutMs, sendTimeoutMs and connectTimeoutMs must be positive");
        }
        if (flowControlWindow < 4096) {
            throw new IllegalArgumentException("flowControlWindow must be at least 4096 bytes");
        }
        if (!(flowControlThreshold > 0 && flowControlThreshold <= 1)) {
            throw new IllegalArgumentException("flowControlThreshold must be in (0, 1]");
        }
        if (ibqMaxBuffers < 1 || ibqMaxBytes < 1) {
            throw new IllegalArgumentException("ibqMaxBuffers and ibqMaxBytes must be positive");
        }
        if (maxMessageSize < 1024) {
            throw new IllegalArgumentException("maxMessageSize must be at least 1024 bytes");
        }
        if (maxUnfinishedBytesPerConnection < maxMessageSize) {
            throw new IllegalArgumentException("maxUnfinishedBytesPerConnection (" + maxUnfinishedBytesPerConnection
                    + ") must be at least maxMessageSize (" + maxMessageSize + ")");
        }
        if (maxUnfinishedBytes < maxUnfinishedBytesPerConnection) {
            throw new IllegalArgumentException("maxUnfinishedBytes (" + maxUnfinishedBytes
                    + ") must be at least maxUnfinishedBytesPerConnection (" + maxUnfinishedBytesPerConnection + ")");
        }
        for (Map.Entry<Integer, String> n : nodes.entrySet()) {
            if (n.getValue().lastIndexOf(':') < 1) {
                throw new IllegalArgumentException("node." + n.getKey() + " = '" + n.getValue() + "' is not host:port");
            }
        }
        if (transport.equals("nio") || transport.equals("auto") || authKeyFile != null) {
            authKey(); // the file's permissions and the key's length
        }
    }
}
