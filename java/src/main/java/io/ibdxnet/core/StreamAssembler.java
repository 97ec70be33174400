package io.ibdxnet.core;

import io.ibdxnet.memory.Memory;
import io.ibdxnet.transport.OutgoingRingBuffer;
import java.util.HashMap;
import java.util.Map;

/**
 * Turns the byte stream of one connection back into messages, whatever the
 * buffer boundaries: a header or payload split across receive buffers (or
 * across the sender's ring wrap-around) is resumed with the next buffer.
 * {@link Frame#SKIP} frames are dropped unread.
 * Used by the message creation coordinator only (one thread).
 *
 * <p>The stream comes from a peer that may be buggy or hostile: every header
 * field is checked before it is used (see {@link #check}), messages are at
 * most {@link ReceiveLimits#maxMessageSize} and unfinished ones claim their
 * bytes from {@link ReceiveLimits} before anything is allocated. A violation
 * is a {@link ProtocolViolation}; the assembler is then {@link #broken} and
 * must not be fed again.
 *
 * <p>A violation is only what this connection does by itself. When the
 * node's budget cannot take a new message's claim now, {@link #feed} stops
 * at that frame and returns how many bytes it consumed; the assembler is
 * then {@link #waiting} and the caller feeds the rest again (possibly
 * nothing more) once {@link ReceiveLimits#version} changed. Bytes not
 * consumed must not be confirmed to the sender: flow control then holds back
 * this sender only.
 */
public final class StreamAssembler {
    /**
     * A complete message's bytes: {@code length} bytes at index {@code at} of
     * {@code array}, or, if {@code array} is null, at native address
     * {@code at} (valid only during the call).
     */
    public interface Sink {
        void message(int source, byte type, byte subtype, int flags, int requestId, byte[] array, long at, int length);
    }

    private static final int KNOWN_FLAGS = Frame.FIRST | Frame.LAST | Frame.REQUEST | Frame.RESPONSE | Frame.ERROR;
    private static final int KIND = Frame.REQUEST | Frame.RESPONSE | Frame.ERROR;

    /** A message announced by its first frame and not complete yet. */
    private static final class Partial {
        final byte[] data;
        final byte type;
        final byte subtype;
        final int kind;
        final int requestId;
        int filled;

        Partial(int total, byte type, byte subtype, int kind, int requestId) {
            this.data = new byte[total];
            this.type = type;
            this.subtype = subtype;
            this.kind = kind;
            this.requestId = requestId;
        }

        long claim() {
            return data.length + ReceiveLimits.OVERHEAD;
        }
    }

    private final int source;
    private final int connection;
    private final ReceiveLimits limits;
    private final byte[] header = new byte[Frame.HEADER];
    private int headerFilled;
    private int frameLeft;
    private int padLeft;
    private int frameTotal;
    private Partial current;
    /** The frame being read is a {@link Frame#SKIP} frame: its payload is dropped. */
    private boolean skipping;
    private int flags;
    private int messageId;
    private final Map<Integer, Partial> partials = new HashMap<>();
    private final ReceiveLimits.Account account = new ReceiveLimits.Account();
    /** The header in {@link #header} is complete, its frame waits for the node budget. */
    private boolean waiting;
    private boolean broken;

    /** The stream of {@code connection} from {@code source}. */
    public StreamAssembler(int source, int connection, ReceiveLimits limits) {
        this.source = source;
        this.connection = connection;
        this.limits = limits;
    }

    public int source() {
        return source;
    }

    public int connection() {
        return connection;
    }

    /** True after a violation: the rest of this connection's bytes are dropped unread. */
    public boolean broken() {
        return broken;
    }

    /**
     * True while a frame waits for the node budget: the last {@link #feed}
     * stopped before the end of its bytes (or exactly at it, after the
     * frame's header); feed the rest again when the limits' version changed.
     */
    public boolean waiting() {
        return waiting;
    }

    /** Bytes this connection's unfinished messages claim. */
    public long claimed() {
        return account.claimed;
    }

    /**
     * Forgets unfinished messages (their connection ended or broke) and gives
     * their claim back. Returns how many were dropped.
     */
    public int discard() {
        int n = partials.size();
        partials.clear();
        current = null;
        waiting = false;
        limits.forget(account);
        return n;
    }

    /**
     * Parses {@code length} bytes at native {@code address}; returns how many
     * it consumed: all of them, unless it stopped at a frame that waits for
     * the node budget ({@link #waiting}). The caller feeds the bytes from
     * there again later, the same bytes (or more after them).
     */
    public int feed(long address, int length, Sink sink) throws ProtocolViolation {
        if (broken) {
            throw new IllegalStateException("the stream of node " + source + " broke; it must not be fed again");
        }
        try {
            return parse(address, length, sink);
        } catch (ProtocolViolation e) {
            broken = true;
            throw e;
        }
    }

    private int parse(long address, int length, Sink sink) throws ProtocolViolation {
        if (waiting && !startFrame(sink)) {
            return 0;
        }
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
                Memory.copy(address + at, header, headerFilled, n);
                headerFilled += n;
                at += n;
                if (headerFilled == Frame.HEADER && !startFrame(sink)) {
                    return at; // the header is kept; the frame starts when the budget has room
                }
                continue;
            }
            int n = Math.min(frameLeft, length - at);
            if (!skipping) {
                Memory.copy(address + at, current.data, current.filled, n);
                current.filled += n;
            }
            frameLeft -= n;
            at += n;
            if (frameLeft == 0) {
                endFrame(sink);
            }
        }
        return length;
    }

    /**
     * The common case: a single-frame message entirely inside this buffer is
     * handed over where it is (no copy). False if it is not that case.
     */
    private boolean whole(long frame, int available, Sink sink) throws ProtocolViolation {
        // The header is copied either way (the general path reads it again, as bytes).
        Memory.copy(frame, header, 0, Frame.HEADER);
        int length = Frame.getInt(header, 0);
        int f = header[10] & 0xFF;
        if ((f & (Frame.FIRST | Frame.LAST)) != (Frame.FIRST | Frame.LAST) || length < Frame.HEADER || length > available) {
            return false;
        }
        check();
        frameTotal = length;
        padLeft = OutgoingRingBuffer.aligned(length) - length;
        sink.message(source, header[8], header[9], f, Frame.getInt(header, 12), null, frame + Frame.HEADER, length - Frame.HEADER);
        return true;
    }

    /**
     * Every field of the header in {@link #header}, against the frame's own
     * length, the limits and the message it continues.
     */
    private void check() throws ProtocolViolation {
        int length = Frame.getInt(header, 0);
        int f = header[10] & 0xFF;
        int total = Frame.getInt(header, 16);
        if (length < Frame.HEADER) {
            throw violation("frame length " + length + " is shorter than a header");
        }
        if (f == Frame.SKIP) {
            if (header[11] != 0) {
                throw violation("skip frame with reserved " + header[11]);
            }
            return; // nothing else of it is used
        }
        int kind = f & KIND;
        boolean kindOk = kind == 0 || kind == Frame.REQUEST || kind == Frame.RESPONSE || kind == (Frame.RESPONSE | Frame.ERROR);
        if ((f & ~KNOWN_FLAGS) != 0 || !kindOk || header[11] != 0) {
            throw violation("frame flags 0x" + Integer.toHexString(f) + " / reserved " + header[11]);
        }
        if (total < 0 || total > limits.maxMessageSize) {
            throw violation("message of " + Integer.toUnsignedString(total) + " bytes (maxMessageSize " + limits.maxMessageSize + ")");
        }
        int payload = length - Frame.HEADER;
        boolean first = (f & Frame.FIRST) != 0;
        boolean last = (f & Frame.LAST) != 0;
        if (first && last && payload != total) {
            throw violation("single-frame message of " + total + " bytes in a frame of " + payload);
        }
        if (!last && payload == 0) {
            throw violation("empty fragment of an unfinished message");
        }
        int id = Frame.getInt(header, 4);
        // No lookup (and no boxed key) in the common case: nothing unfinished.
        Partial p = partials.isEmpty() ? null : partials.get(id);
        if (first) {
            if (p != null) {
                throw violation("message " + id + " started twice");
            }
            if (!last && payload >= total) {
                throw violation("first frame of " + payload + " bytes of a " + total + "-byte message is not its last");
            }
            return;
        }
        if (p == null) {
            throw violation("fragment of unknown message " + id);
        }
        if (p.type != header[8] || p.subtype != header[9] || p.kind != (f & KIND) || p.requestId != Frame.getInt(header, 12)
                || p.data.length != total) {
            throw violation("fragment of message " + id + " does not match its first frame");
        }
        long after = (long) p.filled + payload;
        if (after > total || (last && after != total) || (!last && after == total)) {
            throw violation("fragment of message " + id + " ends at " + after + " of " + total + " bytes"
                    + (last ? " (last)" : " (not last)"));
        }
    }

    /** False if the frame waits for the node budget ({@link #waiting}); nothing changed then. */
    private boolean startFrame(Sink sink) throws ProtocolViolation {
        check();
        int total = Frame.getInt(header, 16);
        int f = header[10] & 0xFF;
        if ((f & (Frame.FIRST | Frame.LAST)) == Frame.FIRST && !claim(total)) {
            waiting = true;
            return false;
        }
        waiting = false;
        frameTotal = Frame.getInt(header, 0);
        frameLeft = frameTotal - Frame.HEADER;
        messageId = Frame.getInt(header, 4);
        flags = f;
        skipping = flags == Frame.SKIP;
        if (skipping) {
            current = null;
        } else if ((flags & Frame.FIRST) != 0) {
            current = allocate(total);
            if ((flags & Frame.LAST) == 0) {
                partials.put(messageId, current);
            }
        } else {
            current = partials.get(messageId);
        }
        if (frameLeft == 0) {
            endFrame(sink);
        }
        return true;
    }

    /**
     * The claim of a new unfinished message of {@code total} bytes: a
     * violation if this connection's own claims would exceed its limit (its
     * fault alone); false if the node budget cannot take it now (nobody's
     * fault: wait).
     */
    private boolean claim(int total) throws ProtocolViolation {
        long claim = total + ReceiveLimits.OVERHEAD;
        if (account.claimed + claim > limits.perConnection) {
            throw violation("unfinished messages would hold " + (account.claimed + claim)
                    + " bytes (maxUnfinishedBytesPerConnection " + limits.perConnection + ")");
        }
        return limits.claim(account, claim) == ReceiveLimits.Grant.GRANTED;
    }

    /** A new message's buffer; an unfinished one has claimed its bytes from the limits already. */
    private Partial allocate(int total) throws ProtocolViolation {
        boolean single = (flags & Frame.LAST) != 0;
        try {
            return new Partial(total, header[8], header[9], flags & KIND, Frame.getInt(header, 12));
        } catch (OutOfMemoryError e) {
            if (!single) {
                limits.release(account, total + ReceiveLimits.OVERHEAD);
            }
            throw violation("no heap for a message of " + total + " bytes");
        }
    }

    private void endFrame(Sink sink) {
        headerFilled = 0;
        padLeft = OutgoingRingBuffer.aligned(frameTotal) - frameTotal;
        if (skipping) {
            skipping = false;
        } else if ((flags & Frame.LAST) != 0) {
            Partial done = current;
            current = null;
            if (partials.remove(messageId) != null) {
                limits.release(account, done.claim());
            }
            sink.message(source, done.type, done.subtype, flags | done.kind, done.requestId, done.data, 0, done.data.length);
        }
    }

    private ProtocolViolation violation(String what) {
        return new ProtocolViolation("node " + source + ": " + what);
    }
}
