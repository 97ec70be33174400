package io.ibdxnet.nio;

import java.nio.ByteBuffer;

/**
 * The NIO transport's wire format (big-endian), version 4 (3 added LEAVING and
 * FINAL, 4 the connector's flow-control unit). A connection is
 * opened by the sending node and carries its frames; the way back carries
 * only control words (flow-control confirmations, keep-alives).
 *
 * <pre>
 * hello (connector → acceptor, 48 bytes):
 *    0 magic u32 "DXN1"   4 version u16 (4)   6 flags u16 (HELLO_KEYED: the connector uses a pre-shared key)
 *    8 source node u16    10 destination node u16   12 reserved u32
 *   16 instance u64 (random per process start: tells a restart from a duplicate)
 *   24 nonce [16] (fresh random per connection when keyed, else zero)
 *   40 flow unit u64 (bytes one confirmation stands for in what the connector sends: its
 *      window × threshold; the acceptor confirms this connection in it. Outside
 *      [Confirmations.MIN_UNIT, MAX_UNIT] the hello is refused: Refusal.FLOW_UNIT)
 *   The acceptor reads the first 8 bytes first: a peer of another version gets REPLY_BAD_VERSION.
 * reply (acceptor → connector, 8 bytes):
 *    0 magic u32   4 status u16 (REPLY_OK, REPLY_CHALLENGE or a {@link Refusal} code)   6 acceptor node u16
 *   REPLY_CHALLENGE (keyed hello, all checks passed so far) is followed by 56 bytes:
 *    8 acceptor instance u64   16 acceptor nonce [16]   32 acceptor proof [32]
 * proof (connector → acceptor, 32 bytes, keyed only): the connector's proof
 * final reply (acceptor → connector, keyed only): a reply (8 bytes), REPLY_OK or a refusal
 *
 * proof = HMAC-SHA256(key, "ibdxnet nio handshake v4" | role u8 (1 acceptor, 2 connector) | version u16
 *                     | source u16 | destination u16 | connector instance u64 | acceptor instance u64
 *                     | connector flow unit u64 | connector nonce [16] | acceptor nonce [16])
 *
 * then records, each starting at a multiple of 4:
 *   word ≥ 0: a data record of that many bytes (the word included; the frames of the
 *             outgoing ring buffer as they are), padded to 4
 *   word < 0: a control word: 0x80000000 | units confirmed (0 = keep-alive); GOODBYE;
 *             LEAVING (data direction: the sender shuts down, its unfinished messages end here);
 *             FINAL, high word, low word (confirmation direction: the receiver shuts down and has
 *             handled that many bytes beyond its last confirmation — what stays unconfirmed after
 *             it was not handled)
 * </pre>
 *
 * Without a key a connection is hello → reply; with one hello → challenge →
 * proof → final reply, so each side has proved the key over both fresh
 * nonces before a byte of data is accepted. The records that follow are not
 * authenticated (nor encrypted).
 */
final class NioWire {
    static final int MAGIC = 0x44584E31;
    static final short VERSION = 4;
    /** The part of a hello read first (magic, version, flags). */
    static final int HELLO_HEAD = 8;
    static final int HELLO = 48;
    static final int HELLO_KEYED = 1;
    static final int NONCE = 16;
    static final int PROOF = 32;
    static final int REPLY = 8;
    /** What follows a REPLY_CHALLENGE: acceptor instance, nonce and proof. */
    static final int CHALLENGE = 8 + NONCE + PROOF;
    static final int REPLY_OK = 0;
    static final int REPLY_CHALLENGE = 100;
    static final int ROLE_ACCEPTOR = 1;
    static final int ROLE_CONNECTOR = 2;
    static final int KEEP_ALIVE = 0x80000000;
    /** The sender closes the connection on purpose (eviction): not a failure. */
    static final int GOODBYE = 0xFFFFFFFF;
    /** The sending side shuts down (data direction): not a failure, its stream ends here. */
    static final int LEAVING = 0xFFFFFFFE;
    /** The receiving side shuts down (confirmation direction); two words follow: the bytes handled beyond its last confirmation. */
    static final int FINAL = 0xFFFFFFFD;
    static final int MAX_UNITS = 0x7FFFFFFC;
    /** Larger records are garbage (frames are at most the sender's ring / 2). */
    static final int MAX_RECORD = 1 << 28;

    /**
     * Why an acceptor refused a hello: the reply status, the stats counter
     * ({@code hellos_refused_<stat>}) and the reason as each side states it.
     */
    enum Refusal {
        UNKNOWN_NODE(1, "unknown_node", "our node id is not in its node table", "its node id is not in our node table"),
        WRONG_DESTINATION(2, "destination", "it is a different node than the node table says", "it wants a different node"),
        BAD_VERSION(3, "version", "it speaks a different protocol version", "it speaks a different protocol version"),
        // 4 was DUPLICATE: a reconnect of the same instance now replaces its stale connection.
        ADDRESS(5, "address", "our address is not one its node table gives for our node id",
                "its address is not one our node table gives for that node"),
        KEY_REQUIRED(6, "unauthenticated", "it requires a pre-shared key and we have none",
                "it has no pre-shared key and we require one"),
        KEY_UNEXPECTED(7, "unexpected_key", "it has no pre-shared key and we use one",
                "it uses a pre-shared key and we have none"),
        WRONG_PROOF(8, "unauthenticated", "our proof of the pre-shared key was wrong (a different key)",
                "its proof of the pre-shared key was wrong (a different key, or forged)"),
        REPLAYED(9, "replayed", "it saw our handshake nonce before (replayed)", "the hello repeats an earlier handshake (replayed)"),
        FLOW_UNIT(10, "flow_unit", "it does not accept our flow-control unit (flowControlWindow × flowControlThreshold must be in ["
                + io.ibdxnet.transport.Confirmations.MIN_UNIT + ", " + io.ibdxnet.transport.Confirmations.MAX_UNIT + "])",
                "its flow-control unit is not in [" + io.ibdxnet.transport.Confirmations.MIN_UNIT + ", "
                + io.ibdxnet.transport.Confirmations.MAX_UNIT + "]");

        final int status;
        final String stat;
        /** The reason in the connector's words ("it" is the acceptor). */
        final String connectorText;
        /** The reason in the acceptor's words ("it" is the connector). */
        final String acceptorText;

        Refusal(int status, String stat, String connectorText, String acceptorText) {
            this.status = status;
            this.stat = stat;
            this.connectorText = connectorText;
            this.acceptorText = acceptorText;
        }

        static Refusal of(int status) {
            for (Refusal r : values()) {
                if (r.status == status) {
                    return r;
                }
            }
            return null;
        }
    }

    private NioWire() {}

    static void putHello(ByteBuffer b, int flags, int source, int destination, long instance, byte[] nonce, long flowUnit) {
        b.putInt(MAGIC).putShort(VERSION).putShort((short) flags).putShort((short) source).putShort((short) destination)
                .putInt(0).putLong(instance).put(nonce).putLong(flowUnit);
    }

    static void putReply(ByteBuffer b, int status, int node) {
        b.putInt(MAGIC).putShort((short) status).putShort((short) node);
    }

    static int confirmation(int units) {
        return KEEP_ALIVE | units;
    }

    /** A reply status in the connector's words. */
    static String replyText(int status) {
        Refusal r = Refusal.of(status);
        return r != null ? r.connectorText : "status " + status;
    }
}
