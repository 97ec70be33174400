package io.ibdxnet.core;

import io.ibdxnet.memory.Memory;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.Transport;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * The bytes of one stream whose assembler {@link StreamAssembler#waiting
 * waits} for the node budget: copied out of their receive buffers (which go
 * back to the transport at once, so a waiting stream holds no pooled or
 * registered buffer), fed again in order once the budget has room, and
 * confirmed to the sender only then. The sender's flow-control window bounds
 * them: it sends no more than that unconfirmed. Role holder only.
 */
public final class StreamBacklog {
    private final ArrayDeque<ByteBuffer> chunks = new ArrayDeque<>();
    /** Bytes of the first chunk fed already. */
    private int at;
    private long bytes;
    /** Received buffers whose bytes are (partly) here: confirmed once all of them were fed. */
    private final List<IncomingBuffer> unconfirmed = new ArrayList<>();

    /** Keeps the bytes of {@code b} from index {@code from} on (after what is kept already). */
    public void keep(IncomingBuffer b, int from) {
        int n = b.length - from;
        if (n > 0) {
            ByteBuffer c = ByteBuffer.allocateDirect(n);
            long to = Memory.address(c);
            for (int i = 0; i < n; i += 4096) { // copy through a small array: no native-to-native copy in Memory
                int k = Math.min(4096, n - i);
                byte[] tmp = COPY.get();
                Memory.copy(b.address + from + i, tmp, 0, k);
                Memory.copy(tmp, 0, to + i, k);
            }
            chunks.addLast(c);
            bytes += n;
        }
        unconfirmed.add(b);
    }

    private static final ThreadLocal<byte[]> COPY = ThreadLocal.withInitial(() -> new byte[4096]);

    /** Bytes kept and not fed yet. */
    public long bytes() {
        return bytes;
    }

    /**
     * Feeds the kept bytes to {@code a} in order until it waits again. True
     * if everything was fed and {@code a} no longer waits.
     */
    public boolean feedTo(StreamAssembler a, StreamAssembler.Sink sink) throws ProtocolViolation {
        while (true) {
            ByteBuffer c = chunks.peekFirst();
            if (c == null) {
                if (a.waiting()) {
                    a.feed(0L, 0, sink); // the frame whose header came last waits: start it, if it may
                }
                return !a.waiting();
            }
            int n = c.capacity() - at;
            int done = a.feed(Memory.address(c) + at, n, sink);
            at += done;
            bytes -= done;
            if (done == n) {
                chunks.removeFirst();
                at = 0;
            }
            if (a.waiting()) {
                return false;
            }
        }
    }

    /** Confirms every buffer kept here to the transport (all fed, or the stream ended); the backlog is empty after. */
    public void confirm(Transport transport) {
        for (IncomingBuffer b : unconfirmed) {
            transport.consumed(b);
        }
        unconfirmed.clear();
        chunks.clear();
        at = 0;
        bytes = 0;
    }
}
