package io.ibdxnet.core;

import io.ibdxnet.transport.OutgoingRingBuffer;
import io.ibdxnet.transport.RingRecord;

/**
 * Frame header on the wire (20 bytes, big-endian). A message becomes one or
 * more frames; frames of different messages may interleave (many threads
 * write a connection's ring at once), so fragments carry the message id.
 * Frames are records of the outgoing ring: the first word is the frame's
 * total length and each frame is followed by zero padding up to a multiple
 * of {@link OutgoingRingBuffer#ALIGN}.
 *
 * <pre>
 *  0 frameLength u32   header + payload bytes of this frame (padding excluded)
 *  4 messageId   u32   per sending node; 0 in a message of one frame (FIRST|LAST), which needs none
 *  8 type u8  9 subtype u8  10 flags u8 (FIRST, LAST, REQUEST, RESPONSE, ERROR; or SKIP alone)  11 reserved u8 (0)
 * 12 requestId   u32   requests and responses
 * 16 totalLength u32   payload bytes of the whole message
 * </pre>
 *
 * A {@link #SKIP} frame carries no message: the receiver drops its payload
 * unread. It stands in for a frame whose sender reserved ring space for a
 * message serialised in place and then could not finish it (the message
 * wrote more or fewer bytes than it declared, or its export threw): the
 * space cannot be given back once later frames stand behind it.
 */
public final class Frame {
    public static final int HEADER = 20;
    public static final int FIRST = 1;
    public static final int LAST = 2;
    public static final int REQUEST = 4;
    public static final int RESPONSE = 8;
    /** With RESPONSE: the request's handler failed; the payload is the exception's class and message. */
    public static final int ERROR = 16;
    /** Alone: a frame to drop (ids and lengths 0, the payload is whatever was written). */
    public static final int SKIP = 32;

    private Frame() {}

    public static void writeHeader(byte[] h, int frameLength, int messageId, byte type, byte subtype, int flags,
            int requestId, int totalLength) {
        putInt(h, 0, frameLength);
        putInt(h, 4, messageId);
        h[8] = type;
        h[9] = subtype;
        h[10] = (byte) flags;
        h[11] = 0;
        putInt(h, 12, requestId);
        putInt(h, 16, totalLength);
    }

    /**
     * The header of a frame written in place, all but its length word (the
     * ring stores that on publish): bytes 4..19 of {@code r}.
     */
    public static void writeHeader(RingRecord r, int messageId, byte type, byte subtype, int flags, int requestId,
            int totalLength) {
        r.putInt(4, messageId);
        r.putByte(8, type);
        r.putByte(9, subtype);
        r.putByte(10, (byte) flags);
        r.putByte(11, (byte) 0);
        r.putInt(12, requestId);
        r.putInt(16, totalLength);
    }

    /** Turns the frame reserved in {@code r} into a {@link #SKIP} frame of the same length. */
    public static void writeSkip(RingRecord r) {
        writeHeader(r, 0, (byte) 0, (byte) 0, SKIP, 0, 0);
    }

    static void putInt(byte[] b, int at, int v) {
        b[at] = (byte) (v >>> 24);
        b[at + 1] = (byte) (v >>> 16);
        b[at + 2] = (byte) (v >>> 8);
        b[at + 3] = (byte) v;
    }

    public static int getInt(byte[] b, int at) {
        return (b[at] & 0xFF) << 24 | (b[at + 1] & 0xFF) << 16 | (b[at + 2] & 0xFF) << 8 | (b[at + 3] & 0xFF);
    }
}
