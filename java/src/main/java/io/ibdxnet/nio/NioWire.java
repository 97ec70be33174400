package io.ibdxnet.nio;

import java.nio.ByteBuffer;

/**
 * The NIO transport's wire format (big-endian). A connection is opened by
 * the sending node and carries its frames; the way back carries only
 * control words (flow-control confirmations, keep-alives).
 *
 * <pre>
 * hello (connector → acceptor, 20 bytes):
 *    0 magic u32 "DXN1"   4 version u16   6 source node u16   8 destination node u16
 *   10 reserved u16      12 instance u64 (random per process start: tells a restart from a duplicate)
 * reply (acceptor → connector, 8 bytes):
 *    0 magic u32   4 status u16 (REPLY_*)   6 acceptor node u16
 * then records, each starting at a multiple of 4:
 *   word ≥ 0: a data record of that many bytes (the word included; the frames of the
 *             outgoing ring buffer as they are), padded to 4
 *   word < 0: a control word: 0x80000000 | units confirmed (0 = keep-alive); GOODBYE
 * </pre>
 */
final class NioWire {
    static final int MAGIC = 0x44584E31;
    static final short VERSION = 1;
    static final int HELLO = 20;
    static final int REPLY = 8;
    static final int REPLY_OK = 0;
    static final int REPLY_UNKNOWN_NODE = 1;
    static final int REPLY_WRONG_DESTINATION = 2;
    static final int REPLY_BAD_VERSION = 3;
    static final int REPLY_DUPLICATE = 4;
    static final int KEEP_ALIVE = 0x80000000;
    /** The sender closes the connection on purpose (eviction): not a failure. */
    static final int GOODBYE = 0xFFFFFFFF;
    static final int MAX_UNITS = 0x7FFFFFFE;
    /** Larger records are garbage (frames are at most the sender's ring / 2). */
    static final int MAX_RECORD = 1 << 28;

    private NioWire() {}

    static void putHello(ByteBuffer b, int source, int destination, long instance) {
        b.putInt(MAGIC).putShort(VERSION).putShort((short) source).putShort((short) destination).putShort((short) 0)
                .putLong(instance);
    }

    static void putReply(ByteBuffer b, int status, int node) {
        b.putInt(MAGIC).putShort((short) status).putShort((short) node);
    }

    static int confirmation(int units) {
        return KEEP_ALIVE | units;
    }

    static String replyText(int status) {
        switch (status) {
            case REPLY_UNKNOWN_NODE: return "our node id is not in its node table";
            case REPLY_WRONG_DESTINATION: return "it is a different node than the node table says";
            case REPLY_BAD_VERSION: return "it speaks a different protocol version";
            case REPLY_DUPLICATE: return "it already has a connection from our node id and instance";
            default: return "status " + status;
        }
    }
}
