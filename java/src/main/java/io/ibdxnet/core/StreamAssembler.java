package io.ibdxnet.core;

import static io.ibdxnet.ib.UnsafeAccess.UNSAFE;

import java.util.HashMap;
import java.util.Map;

/**
 * Turns the byte stream from one node back into messages, whatever the
 * buffer boundaries: a header or payload split across receive buffers (or
 * across the sender's ring wrap-around) is resumed with the next buffer.
 * Used by the message creation coordinator only (one thread).
 */
public final class StreamAssembler {
    /**
     * A complete message's bytes: {@code length} bytes at {@code offset} in
     * {@code base} (a {@code byte[]}, or null for native memory that is valid
     * only during the call).
     */
    public interface Sink {
        void message(int source, byte type, byte subtype, int flags, int requestId, Object base, long offset, int length);
    }

    private static final long BYTES = UNSAFE.arrayBaseOffset(byte[].class);

    private static final class Partial {
        final byte[] data;
        int filled;

        Partial(int total) {
            data = new byte[total];
        }
    }

    private final int source;
    private final int connection;
    private final byte[] header = new byte[Frame.HEADER];
    private int headerFilled;
    private int frameLeft;
    private int padLeft;
    private int frameTotal;
    private Partial current;
    private byte type;
    private byte subtype;
    private int flags;
    private int requestId;
    private int messageId;
    private final Map<Integer, Partial> partials = new HashMap<>();

    /** The stream of {@code connection} from {@code source}. */
    public StreamAssembler(int source, int connection) {
        this.source = source;
        this.connection = connection;
    }

    public int connection() {
        return connection;
    }

    /** Parses {@code length} bytes at native {@code address}. */
    public void feed(long address, int length, Sink sink) {
        int at = 0;
        while (at < length) {
            if (padLeft > 0) {
                int n = Math.min(padLeft, length - at);
                padLeft -= n;
                at += n;
                continue;
            }
            if (headerFilled == 0 && length - at >= Frame.HEADER && whole(address + at, length - at, sink)) {
                at += frameTotal; // padLeft is set: skipped above, here or in the next buffer
                continue;
            }
            if (headerFilled < Frame.HEADER) {
                int n = Math.min(Frame.HEADER - headerFilled, length - at);
                UNSAFE.copyMemory(null, address + at, header, UNSAFE.arrayBaseOffset(byte[].class) + headerFilled, n);
                headerFilled += n;
                at += n;
                if (headerFilled == Frame.HEADER) {
                    startFrame(sink);
                }
                continue;
            }
            int n = Math.min(frameLeft, length - at);
            UNSAFE.copyMemory(null, address + at, current.data, UNSAFE.arrayBaseOffset(byte[].class) + current.filled, n);
            current.filled += n;
            frameLeft -= n;
            at += n;
            if (frameLeft == 0) {
                endFrame(sink);
            }
        }
    }

    /**
     * The common case: a single-frame message entirely inside this buffer is
     * handed over where it is (no copy). False if it is not that case.
     */
    private boolean whole(long frame, int available, Sink sink) {
        // The header is copied either way (the general path reads it again, as bytes).
        UNSAFE.copyMemory(null, frame, header, BYTES, Frame.HEADER);
        int total = Frame.getInt(header, 0);
        int f = header[10] & 0xFF;
        if ((f & (Frame.FIRST | Frame.LAST)) != (Frame.FIRST | Frame.LAST) || total < Frame.HEADER || total > available) {
            return false;
        }
        if (Frame.getInt(header, 16) != total - Frame.HEADER) {
            throw new IllegalStateException("corrupt frame from node " + source + ": length " + total + " of " + Frame.getInt(header, 16));
        }
        frameTotal = total;
        padLeft = OutgoingRingBuffer.aligned(total) - total;
        sink.message(source, header[8], header[9], f, Frame.getInt(header, 12), null, frame + Frame.HEADER, total - Frame.HEADER);
        return true;
    }

    private void startFrame(Sink sink) {
        frameTotal = Frame.getInt(header, 0);
        frameLeft = frameTotal - Frame.HEADER;
        messageId = Frame.getInt(header, 4);
        type = header[8];
        subtype = header[9];
        flags = header[10] & 0xFF;
        requestId = Frame.getInt(header, 12);
        int total = Frame.getInt(header, 16);
        if (frameLeft < 0 || total < 0 || frameLeft > total) {
            throw new IllegalStateException("corrupt frame from node " + source + ": length " + frameTotal + " of " + total);
        }
        if ((flags & Frame.FIRST) != 0) {
            current = new Partial(total);
            if ((flags & Frame.LAST) == 0) {
                partials.put(messageId, current);
            }
        } else {
            current = partials.get(messageId);
            if (current == null) {
                throw new IllegalStateException("fragment of unknown message " + messageId + " from node " + source);
            }
        }
        if (frameLeft == 0) {
            endFrame(sink);
        }
    }

    private void endFrame(Sink sink) {
        headerFilled = 0;
        padLeft = OutgoingRingBuffer.aligned(frameTotal) - frameTotal;
        if ((flags & Frame.LAST) != 0) {
            partials.remove(messageId);
            Partial done = current;
            current = null;
            sink.message(source, type, subtype, flags, requestId, done.data, BYTES, done.data.length);
        }
    }
}
