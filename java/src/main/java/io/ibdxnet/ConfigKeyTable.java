package io.ibdxnet;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * The table of {@link DXNetConfig}'s keys ({@code DXNetConfig.KEYS}): each
 * key's name, type, default, range and meaning once, with how it reads and
 * writes its field; and the bounds the ranges use.
 */
final class ConfigKeyTable {
    private ConfigKeyTable() {
    }

    /** Transports {@link DXNetConfig#transport} can name. */
    static final List<String> TRANSPORTS = Arrays.asList("auto", "ib", "nio", "loopback");
    /** Largest timeout in ms (one day), as the native engine bounds its own. */
    static final int MAX_TIMEOUT_MS = 86_400_000;
    /** Largest {@code ibqMaxBuffers}: the queue's array (a reference per buffer) is allocated at start. */
    static final int MAX_QUEUED_BUFFERS = 1 << 20;
    /** Largest {@code nioBufferSize} (64 MiB: a record is at most 256 MiB, and is read in pieces anyway). */
    static final int MAX_BUFFER_SIZE = 64 << 20;
    /** Largest {@code nioBufferCount}. */
    static final int MAX_BUFFER_COUNT = 1 << 20;
    /** Largest receive pool, {@code nioBufferCount × nioBufferSize} (16 GiB; it grows to this under load). */
    static final long MAX_POOL_BYTES = 16L << 30;

    /** Every key: name, type, default, range, meaning (the README's table is generated from it). */
    static final List<ConfigKey> KEYS = Collections.unmodifiableList(Arrays.asList(
        ConfigKey.ofInt("nodeId", 0, 0, 0xFFFE, "this node's id",
            c -> c.nodeId, (c, v) -> c.nodeId = v).setsNative("node_id"),
        ConfigKey.ofChoice("transport", "auto", TRANSPORTS, "`auto`: `ib` when the host has an RDMA device (or "
            + "`native.fabric` names one), else `nio`, logged at start; `ib`: the native engine; `nio`: TCP; "
            + "`loopback`: nodes of this JVM only",
            c -> c.transport, (c, v) -> c.transport = v),
        ConfigKey.ofAddress("listen", "where this node listens; empty: all interfaces, the port of its own node "
            + "table entry, else any port",
            c -> c.listen, (c, v) -> c.listen = v).setsNative("listen"),
        ConfigKey.ofInt("maxConnections", 100, 1, 0xFFFE, "open outgoing connections; the least recently used "
            + "idle one is closed for a new one",
            c -> c.maxConnections, (c, v) -> c.maxConnections = v).setsNative("max_connections"),
        ConfigKey.ofInt("handlerThreads", 2, 1, 1024, "message handler threads",
            c -> c.handlerThreads, (c, v) -> c.handlerThreads = v),
        ConfigKey.ofBoolean("orderPerSender", true, "handle one source node's messages one at a time in arrival "
            + "order (different nodes in parallel); false: any handler thread takes any message",
            c -> c.orderPerSender, (c, v) -> c.orderPerSender = v),
        ConfigKey.ofInt("handlerQueueSize", 16_384, 1, Integer.MAX_VALUE, "received batches not yet handled, "
            + "all sources together; a source with none queued may always queue one",
            c -> c.handlerQueueSize, (c, v) -> c.handlerQueueSize = v),
        ConfigKey.ofLong("handlerQueueBytes", 64L << 20, 1024, 1L << 40, "payload bytes (plus 64 per message) of "
            + "received messages not yet handled, all sources together; a source with nothing queued may always "
            + "queue one buffer's messages",
            c -> c.handlerQueueBytes, (c, v) -> c.handlerQueueBytes = v),
        ConfigKey.ofLong("handlerQueueBytesPerSource", 8L << 20, 1024, 1L << 40, "… of one source node; a source "
            + "over it is not read (its flow-control window is not confirmed) until its handlers catch up",
            c -> c.handlerQueueBytesPerSource, (c, v) -> c.handlerQueueBytesPerSource = v),
        ConfigKey.ofBoolean("receiveInline", true, "a transport's receiving thread turns a received buffer into "
            + "messages itself while nothing waits for the coordinator (a round trip crosses one thread hand-off "
            + "less per side; messages' importPayload then runs on that thread); false: always the coordinator",
            c -> c.receiveInline, (c, v) -> c.receiveInline = v),
        ConfigKey.ofBoolean("handleOnReceivingThread", false, "where a buffer is taken inline (`receiveInline`) and "
            + "none of its source's messages waits for the handler pool, the receiving thread runs their handlers "
            + "itself (one thread hand-off less; for short handlers: nothing else is received meanwhile), except "
            + "what a thread waiting in `sendSync` receives (ib's `recv_from_caller`): the pool handles that. There "
            + "`sendSync` throws IllegalStateException and a send that would wait for ring or window room is "
            + "deferred like an async send; false: always the handler pool",
            c -> c.handleOnReceivingThread, (c, v) -> c.handleOnReceivingThread = v),
        ConfigKey.ofInt("requestTimeoutMs", 10_000, 1, MAX_TIMEOUT_MS, "default request timeout",
            c -> c.requestTimeoutMs, (c, v) -> c.requestTimeoutMs = v),
        ConfigKey.ofInt("statsIntervalMs", 0, 0, 3_600_000, "log the node's counters (core and transport, as its "
            + "MBeans show them) on the System.Logger `io.ibdxnet.stats` at INFO this often; 0: never",
            c -> c.statsIntervalMs, (c, v) -> c.statsIntervalMs = v),
        ConfigKey.ofInt("sendTimeoutMs", 10_000, 1, MAX_TIMEOUT_MS, "how long a send may wait for ring space or "
            + "the flow-control window",
            c -> c.sendTimeoutMs, (c, v) -> c.sendTimeoutMs = v),
        ConfigKey.ofInt("handlerSendTimeoutMs", 1_000, 1, MAX_TIMEOUT_MS, "… for a send or reply made on a message "
            + "handler thread (at most `sendTimeoutMs`): a peer that does not read holds a handler no longer",
            c -> c.handlerSendTimeoutMs, (c, v) -> c.handlerSendTimeoutMs = v),
        ConfigKey.ofLong("maxDeferredBytesPerNode", 32L << 20, 0, 1L << 40, "async requests that cannot go out at "
            + "once (no connection yet, ring or window full) wait per destination, serialised, up to this many bytes; "
            + "beyond, `sendAsync`'s future fails at once with `OVERLOADED`. One request alone may always wait, as "
            + "may the rest of one partly sent",
            c -> c.maxDeferredBytesPerNode, (c, v) -> c.maxDeferredBytesPerNode = v),
        ConfigKey.ofInt("connectTimeoutMs", 10_000, 1, MAX_TIMEOUT_MS, "connection setup timeout",
            c -> c.connectTimeoutMs, (c, v) -> c.connectTimeoutMs = v).setsNative("connect_timeout_ms"),
        ConfigKey.ofInt("helloTimeoutMs", 2_000, 1, MAX_TIMEOUT_MS, "nio: an incoming connection's handshake (its "
            + "hello, and the key's proof) must end within this, and within `connectTimeoutMs`; until then it holds "
            + "one of its address's 4 handshake slots",
            c -> c.helloTimeoutMs, (c, v) -> c.helloTimeoutMs = v),
        ConfigKey.ofLong("flowControlWindow", 16L << 20, 4096, Long.MAX_VALUE, "flow control window per "
            + "connection, bytes (paper Table 2: 16 MB); may differ between nodes: each sender names its unit "
            + "(window × threshold, in [64, 2^62]) when a connection is set up and the receiver confirms in it",
            c -> c.flowControlWindow, (c, v) -> c.flowControlWindow = v),
        ConfigKey.ofFraction("flowControlThreshold", 0.1, "the receiver confirms each time this share of our window was "
            + "handled; may differ between nodes, as flowControlWindow",
            c -> c.flowControlThreshold, (c, v) -> c.flowControlThreshold = v),
        ConfigKey.ofInt("ibqMaxBuffers", 8192, 1, MAX_QUEUED_BUFFERS, "incoming buffers queued at most (a "
            + "reference each is allocated at start)",
            c -> c.ibqMaxBuffers, (c, v) -> c.ibqMaxBuffers = v),
        ConfigKey.ofLong("ibqMaxBytes", 128L << 20, 1, Long.MAX_VALUE, "incoming bytes queued at most",
            c -> c.ibqMaxBytes, (c, v) -> c.ibqMaxBytes = v),
        ConfigKey.ofInt("ibqMaxBuffersPerSource", 1024, 1, MAX_QUEUED_BUFFERS, "… of one source node (at most `ibqMaxBuffers`, "
            + "and an eighth of the transport's receive buffers: `nioBufferCount`, ib's `recv_buffer_count`); ib: "
            + "the receive buffers one source may hold, beyond them its data is copied out",
            c -> c.ibqMaxBuffersPerSource, (c, v) -> c.ibqMaxBuffersPerSource = v),
        ConfigKey.ofLong("ibqMaxBytesPerSource", 32L << 20, 1, 1L << 40, "… of one source node (at most `ibqMaxBytes`)",
            c -> c.ibqMaxBytesPerSource, (c, v) -> c.ibqMaxBytesPerSource = v),
        ConfigKey.ofInt("nioBufferSize", 64 << 10, 4096, MAX_BUFFER_SIZE, "nio, loopback: bytes of one pooled "
            + "receive buffer; the pool (`nioBufferCount` × this, at most 16 GiB and within the JVM's direct memory "
            + "limit) allocates 16 buffers at start and more only while all are lent out",
            c -> c.nioBufferSize, (c, v) -> c.nioBufferSize = v),
        ConfigKey.ofInt("nioBufferCount", 512, 2, MAX_BUFFER_COUNT, "nio, loopback: pooled receive buffers",
            c -> c.nioBufferCount, (c, v) -> c.nioBufferCount = v),
        ConfigKey.ofPow2("nioRingSize", 4 << 20, 8192, 1 << 30, "nio, loopback: outgoing ring per connection, "
            + "bytes, at most: resident only where written and given back once the ring was empty for a second "
            + "(JDK 22+ with the jar: a private mapping; JDK 17–21: an unlinked file in /dev/shm, committed 16 KiB "
            + "to 1 MiB at a time; without a tmpfs with room for it, direct memory, resident in full from the "
            + "connection's start)",
            c -> c.nioRingSize, (c, v) -> c.nioRingSize = v),
        ConfigKey.ofInt("keepAliveMs", 1_000, 1, MAX_TIMEOUT_MS, "nio: an idle connection sends a keep-alive "
            + "after this long",
            c -> c.keepAliveMs, (c, v) -> c.keepAliveMs = v),
        ConfigKey.ofInt("idleTimeoutMs", 10_000, 2, MAX_TIMEOUT_MS, "nio: a connection that received nothing "
            + "for this long has failed; more than `keepAliveMs`",
            c -> c.idleTimeoutMs, (c, v) -> c.idleTimeoutMs = v),
        ConfigKey.ofInt("maxMessageSize", 64 << 20, 1024, Integer.MAX_VALUE, "largest message payload this node "
            + "sends or accepts (a larger one is a protocol violation)",
            c -> c.maxMessageSize, (c, v) -> c.maxMessageSize = v),
        ConfigKey.ofLong("maxUnfinishedBytesPerConnection", 256L << 20, 1024, Long.MAX_VALUE, "bytes unfinished "
            + "multi-frame messages of one connection may claim; at least `maxMessageSize`",
            c -> c.maxUnfinishedBytesPerConnection, (c, v) -> c.maxUnfinishedBytesPerConnection = v),
        ConfigKey.ofLong("maxUnfinishedBytes", 1L << 30, 1024, Long.MAX_VALUE, "… of all connections together; "
            + "at least `maxUnfinishedBytesPerConnection`",
            c -> c.maxUnfinishedBytes, (c, v) -> c.maxUnfinishedBytes = v),
        ConfigKey.ofBoolean("checkPeerAddress", true, "nio: accept a hello only from the IP address the node "
            + "table gives for the node it claims to be",
            c -> c.checkPeerAddress, (c, v) -> c.checkPeerAddress = v),
        ConfigKey.ofPath("authKeyFile", "file holding the pre-shared key (owner-only); empty: "
            + "`IBDXNET_AUTH_KEY`, else no key. With a key only nodes with the same key are accepted",
            c -> c.authKeyFile, (c, v) -> c.authKeyFile = v).setsNative("auth_key_file")));

    /** " (did you mean 'x'?)" for the known key nearest to {@code unknown}, if one is close. */
    static String suggestion(String unknown) {
        String best = null;
        int bestDistance = Integer.MAX_VALUE;
        for (ConfigKey k : KEYS) {
            int d = ConfigKey.distance(unknown, k.name);
            if (d < bestDistance) {
                best = k.name;
                bestDistance = d;
            }
        }
        return bestDistance <= Math.max(2, best.length() / 3) ? " (did you mean '" + best + "'?)" : "";
    }

    /** {@code DXNetConfig.markdownTable}. */
    static String markdownTable() {
        StringBuilder s = new StringBuilder("| key | type | default | range | meaning |\n|---|---|---|---|---|\n");
        for (ConfigKey k : KEYS) {
            String dflt = k.defaultText.isEmpty() ? "—" : "`" + k.defaultText + "`";
            String doc = k.nativeKey == null ? k.doc : k.doc + " (sets `native." + k.nativeKey + "`)";
            s.append("| `").append(k.name).append("` | ").append(k.type).append(" | ").append(dflt).append(" | ")
                    .append(k.range).append(" | ").append(doc).append(" |\n");
        }
        s.append("| `node.<id>` | host:port | — | | the node table: where node `<id>` listens (nio) or its connection "
                + "manager (ib) |\n");
        s.append("| `native.<key>` | | | | a key of the native engine (table below), for transport `ib`; on `nio` and `loopback` a misspelt key or a bad value fails the start as on `ib` (values are checked by the engine's parser where the library loads) and the others are logged as unused |\n");
        return s.toString();
    }
}
