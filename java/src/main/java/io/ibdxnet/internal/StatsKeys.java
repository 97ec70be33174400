package io.ibdxnet.internal;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Every key the Java side puts into a statistics map, with its meaning,
 * grouped by where it comes from: the one definition of them. The "Java
 * counters" tables of docs/operations.md are {@link #markdownTables}, and
 * {@code StatsKeysTest} checks that {@code DXNet.transportStats()} and the
 * Node MBean have exactly these keys (on ib with the native engine's, which
 * {@code msgrc/stats.rs} describes). A key added to a map fails that test
 * until it has its line here.
 */
public final class StatsKeys {
    /** One key of a statistics map and what its value means (Markdown, one line, no {@code |}). */
    public static final class Key {
        public final String name;
        public final String meaning;

        Key(String name, String meaning) {
            this.name = name;
            this.meaning = meaning;
        }
    }

    /** The keys one part of the node puts into a map, in the order it puts them. */
    public static final class Group {
        /** Its name in the documentation. */
        public final String title;
        /** Which maps have these keys (Markdown). */
        public final String where;
        public final List<Key> keys;

        Group(String title, String where, Key... keys) {
            this.title = title;
            this.where = where;
            this.keys = Collections.unmodifiableList(Arrays.asList(keys));
        }

        /** The keys' names, in order. */
        public Set<String> names() {
            Set<String> out = new LinkedHashSet<>();
            for (Key k : keys) {
                out.add(k.name);
            }
            return Collections.unmodifiableSet(out);
        }
    }

    // Keys that several transports put, with the same meaning.
    private static final Key PEER_SHUTDOWNS = new Key("peer_shutdowns",
            "connections whose peer shut down on purpose (not counted as failures)");
    private static final Key UNCONFIRMED_BYTES = new Key("unconfirmed_bytes",
            "gauge: bytes sent and not yet confirmed by their receivers, over all connections");
    private static final Key RING_BYTES_RESIDENT = new Key("ring_bytes_resident",
            "gauge: bytes of the send rings' memory resident now (whole pages; a file ring's: what it committed;"
                    + " a ring that cannot tell counts 0)");
    private static final Key RECV_POOL_BUFFERS = new Key("recv_pool_buffers",
            "gauge: receive buffers the transport's pool has allocated");
    private static final Key RECV_POOL_BYTES = new Key("recv_pool_bytes",
            "gauge: the direct memory of those buffers, in bytes");
    private static final Key RECV_POOL_REFUSED = new Key("recv_pool_refused",
            "times the pool could not grow because the JVM's direct memory was used up");

    /** What {@code DXNet.transportStats()} adds to every transport's map (the Node MBean has them too). */
    public static final Group CORE = new Group("Core", "`DXNet.transportStats()` on every transport, and the "
            + "Node MBean `io.ibdxnet:type=Node,node=<id>`",
        new Key("protocol_violations", "received streams that broke the frame format or a receive limit (their "
            + "connection is closed); on `ib` added to the engine's count of the same name (the Node MBean: the "
            + "core's alone)"),
        new Key("stream_errors", "received data whose parsing failed with an unexpected error, not a protocol "
            + "violation; what it held is dropped"),
        new Key("partial_messages_dropped", "unfinished messages dropped because their connection ended or broke"),
        new Key("bytes_dropped_after_violation", "received bytes dropped unparsed because their stream had broken"),
        new Key("responses_from_wrong_node", "responses refused because another node than the request's target sent "
            + "them"),
        new Key("handler_errors", "message handlers that threw (the handler thread goes on)"),
        new Key("confirmed_before_handled", "received buffers confirmed to their sender before their handlers "
            + "returned, because a handler here (or a send one waits behind) waited for that sender's window: a loss "
            + "of them is not reported"),
        new Key("replies_failed", "replies (`DXNet.reply`) not sent: the send failed, or the reply was invalid "
            + "(its requester then gets an error)"),
        new Key("possible_losses", "connections that failed with data unconfirmed, and notices of peers that "
            + "dropped plain messages of ours (both told to the `DXNet.LossListener`)"),
        new Key("messages_received_copied", "received messages assembled from several frames or receive buffers "
            + "into a heap array (the others are imported where they lie in the receive buffer)"),
        new Key("receiving_thread_sends_deferred", "sends of handlers on a receiving thread "
            + "(`handleOnReceivingThread`) that could not go out at once and were deferred"),
        new Key("drop_notices_sent", "notices sent to the sources of plain messages dropped here (at most one per "
            + "source every 100 ms)"),
        new Key("drop_notices_received", "notices received from nodes that dropped plain messages of ours"),
        new Key("messages_copied", "messages to other nodes serialised into a buffer and copied into the send "
            + "ring: no `Message.payloadSize`, larger than one frame, an async request that could not go out at "
            + "once, or a drop notice (the others are serialised in place)"),
        new Key("in_place_aborted", "in-place serialisations that failed (a wrong `payloadSize`, or the export "
            + "threw), sent as frames the receiver skips"),
        new Key("unfinished_bytes_claimed", "gauge: bytes claimed now by unfinished received messages (within the "
            + "receive limits)"),
        new Key("buffers_received_inline", "received buffers the transport's own thread turned into messages "
            + "(`receiveInline`)"),
        new Key("batches_handled_on_receiving_thread", "received batches whose handlers the transport's thread ran "
            + "itself (`handleOnReceivingThread`)"),
        new Key("ibq_spilled_buffers", "received buffers copied out so that their receive buffers went back at "
            + "once: a held source's beyond its first, and on `ib` a source's beyond its share"),
        new Key("ibq_spilled_bytes", "bytes of `ibq_spilled_buffers`"),
        new Key("ibq_bytes_beyond_share", "gauge: on `ib`, bytes of sources beyond their share, kept outside the "
            + "queue's bounds (`DXNet.incomingBytesBeyondShare()`)"));

    /** The Node MBean's keys beyond {@link #CORE} (not in {@code transportStats()}). */
    public static final Group NODE_MBEAN = new Group("Node MBean only", "`io.ibdxnet:type=Node,node=<id>` and "
            + "the core half of the statistics line, besides the core keys",
        new Key("messages_dropped", "messages dropped: unknown type, no receiver, late response, bad payload "
            + "(`DXNet.droppedMessages()`)"),
        new Key("pending_requests", "gauge: requests waiting for their response, failure or timeout "
            + "(`DXNet.pendingRequests()`)"),
        new Key("incoming_buffers_queued", "gauge: received buffers waiting to be turned into messages, bounded by "
            + "`ibqMaxBuffers` (`DXNet.incomingBuffersQueued()`)"),
        new Key("incoming_bytes_queued", "gauge: their bytes, bounded by `ibqMaxBytes` "
            + "(`DXNet.incomingBytesQueued()`)"),
        new Key("handler_batches_queued", "gauge: message batches not yet handled, bounded by `handlerQueueSize` "
            + "(`DXNet.handlerBatchesQueued()`)"),
        new Key("handler_bytes_queued", "gauge: their bytes (payload plus 64 per message), bounded by "
            + "`handlerQueueBytes` (`DXNet.handlerBytesQueued()`)"));

    /** {@code NioTransport.stats()}. */
    public static final Group NIO = new Group("nio", "`transportStats()` and the transport MBean on `nio`",
        new Key("connections", "gauge: outgoing connections open now"),
        new Key("bytes_sent", "bytes written to the sockets"),
        new Key("bytes_received", "bytes read from the sockets"),
        new Key("writes_by_sender", "socket writes a sender made itself: its frame found the connection idle "
            + "and left without a hand-off to the selector thread"),
        new Key("rejected", "incoming connections refused: the sum of the `hellos_refused_*` counters, "
            + "`accepts_refused_unknown_address` and `handshakes_displaced`"),
        new Key("failures", "connections that failed (not closed on purpose, not ended by the peer's shutdown)"),
        PEER_SHUTDOWNS,
        new Key("evictions", "idle outgoing connections closed, the least recently used, to stay within "
            + "`maxConnections`"),
        new Key("keep_alives", "keep-alives received (an idle peer sends one every `keepAliveMs`)"),
        UNCONFIRMED_BYTES, RING_BYTES_RESIDENT, RECV_POOL_BUFFERS, RECV_POOL_BYTES, RECV_POOL_REFUSED,
        new Key("hellos_refused_bad_magic", "incoming connections that did not start with a DXNet hello"),
        new Key("hellos_refused_version", "hellos refused: another protocol version"),
        new Key("hellos_refused_destination", "hellos refused: meant for another node than this one"),
        new Key("hellos_refused_unknown_node", "hellos refused: their node id is not in this node's table"),
        new Key("hellos_refused_address", "hellos refused: their address is not one the node table gives for "
            + "their node id (`checkPeerAddress`)"),
        new Key("hellos_refused_unauthenticated", "hellos refused: no proof of the pre-shared key this node "
            + "requires, or a wrong one"),
        new Key("hellos_refused_unexpected_key", "hellos refused: the peer uses a pre-shared key, this node has "
            + "none"),
        new Key("hellos_refused_replayed", "hellos refused: they repeat an earlier handshake's nonce"),
        new Key("hellos_refused_flow_unit", "hellos refused: the peer's flow-control unit is out of range"),
        new Key("hellos_refused_duplicate", "always 0 (kept for compatibility): a reconnect of the same instance "
            + "replaces its stale connection"),
        new Key("hellos_refused_timeout", "incoming handshakes closed unfinished after `helloTimeoutMs` (or "
            + "`connectTimeoutMs`)"),
        new Key("hellos_refused_busy", "incoming connections refused because every handshake slot was held"),
        new Key("handshakes_peer_unauthenticated", "outgoing handshakes whose acceptor did not prove the "
            + "pre-shared key"),
        new Key("handshakes_abandoned", "incoming connections that ended (closed, reset) during their handshake"),
        new Key("accepts_refused_unknown_address", "connections reset at accept: no node of the table is at their "
            + "address (`checkPeerAddress`)"),
        new Key("handshakes_displaced", "incoming handshakes closed to make room for a newer one from the same "
            + "address"));

    /** {@code LoopbackTransport.stats()}. */
    public static final Group LOOPBACK = new Group("loopback", "`transportStats()` and the transport MBean on "
            + "`loopback`",
        new Key("connections", "gauge: connections to other nodes in the transport's table"),
        new Key("bytes_sent", "bytes copied from the send rings into the receivers' buffers"),
        UNCONFIRMED_BYTES, RING_BYTES_RESIDENT, RECV_POOL_BUFFERS, RECV_POOL_BYTES, RECV_POOL_REFUSED);

    /** What the library's JNI layer adds to the engine's keys on {@code ib} ({@code NativeEngine.stats()}). */
    public static final Group IB_JNI = new Group("ib (JNI layer)", "`transportStats()` and the transport MBean on "
            + "`ib`: the library's JNI layer adds them to the engine's keys, "
            + "`native/ibdxnet/src/jni/natives.rs` `stats`",
        new Key("upcall_exceptions", "Java exceptions that escaped an engine thread's call into Java "
            + "(`EngineCallbacks`): counted, logged and cleared"),
        new Key("upcall_check_every", "1 if the library checks for a Java exception after every call into Java (a "
            + "VM other than HotSpot, or `-Xcheck:jni`), 0 if only after a call that returned 0"),
        new Key("running", "1 while the engine runs, 0 once it has stopped"));

    /** What {@code IbTransport.stats()} adds to the native engine's keys. */
    public static final Group IB = new Group("ib (Java side)", "`transportStats()` and the transport MBean on "
            + "`ib`, after the engine's keys ([Engine statistics](#engine-statistics)) and the JNI layer's",
        new Key("closes_with_unsent_data", "orderly closes that lost data: published but not posted, or lost in "
            + "flight (reported as failures)"),
        PEER_SHUTDOWNS,
        new Key("bytes_resent_after_close", "bytes of records stranded by an orderly close, written to the node's "
            + "next connection"),
        UNCONFIRMED_BYTES);

    /** Every group, in the order of the documentation. */
    public static final List<Group> GROUPS = Collections.unmodifiableList(Arrays.asList(CORE, NODE_MBEAN, NIO,
            LOOPBACK, IB_JNI, IB));

    private StatsKeys() {
    }

    /**
     * The keys a transport's own map has besides the native engine's: those of
     * {@link #NIO}, {@link #LOOPBACK}, or on {@code ib} {@link #IB_JNI} and {@link #IB}.
     */
    public static Set<String> transportKeys(String kind) {
        Set<String> out = new LinkedHashSet<>();
        switch (kind) {
            case "nio":
                out.addAll(NIO.names());
                break;
            case "loopback":
                out.addAll(LOOPBACK.names());
                break;
            case "ib":
                out.addAll(IB_JNI.names());
                out.addAll(IB.names());
                break;
            default:
                throw new IllegalArgumentException("no transport " + kind);
        }
        return Collections.unmodifiableSet(out);
    }

    /** The tables of docs/operations.md's "Java counters": one per group, under its title and maps. */
    public static String markdownTables() {
        StringBuilder s = new StringBuilder();
        for (Group g : GROUPS) {
            if (s.length() > 0) {
                s.append('\n');
            }
            s.append("**").append(g.title).append("** (").append(g.where).append("):\n\n");
            s.append("| key | meaning |\n|---|---|\n");
            for (Key k : g.keys) {
                s.append("| `").append(k.name).append("` | ").append(k.meaning).append(" |\n");
            }
        }
        return s.toString();
    }
}
