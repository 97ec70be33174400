package io.ibdxnet.nio;

import io.ibdxnet.nio.NioFailure.NioException;
import io.ibdxnet.transport.DirectBufferPool;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.TransportListener;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * Reads an open connection ({@link NioWire}): on an incoming channel the
 * records, handed to the core in pooled buffers as they arrived, with the
 * control words cut out; on an outgoing channel the control words of the way
 * back (confirmations, keep-alives, the peer's FINAL count). Selector thread
 * only. It changes no table: an ending it reads is returned as an
 * {@link End} for the reactor to act on, a broken peer is a
 * {@link NioException} of kind {@link NioFailure#PROTOCOL}.
 */
final class NioRecordReader {
    /** Pooled buffers read per call at most, so that one busy peer cannot starve the others. */
    private static final int ROUNDS = 4;

    /** How a read left the connection. */
    enum End {
        /** Still open (possibly stalled). */
        OPEN,
        /** The sender said goodbye: close in order, its stream continues on its next connection. */
        GOODBYE,
        /** The close was expected (the peer read our goodbye): close quietly. */
        CLOSED
    }

    private final DirectBufferPool pool;
    private final IncomingBuffer.BufferReleaser releaser;
    private final TransportListener listener;
    private final NioCounters counters;
    /** Data bytes moved down over cut control words, ever (selector thread; tests check the walk is linear). */
    long bytesMoved;

    NioRecordReader(DirectBufferPool pool, TransportListener listener, NioCounters counters) {
        this.pool = pool;
        this.releaser = pool::release;
        this.listener = listener;
        this.counters = counters;
    }

    /** Frames from the peer: read into pooled buffers and hand them to the core. */
    End readData(NioChannel c, long now) throws IOException {
        if (c.refused() != null) {
            if (!listener.onBuffer(c.refused())) {
                c.stall();
                return End.OPEN;
            }
            c.clearRefused();
            if (c.orderly) {
                return End.GOODBYE;
            }
        }
        for (int round = 0; round < ROUNDS; round++) {
            int id = pool.take();
            if (id < 0) {
                c.stall();
                return End.OPEN;
            }
            ByteBuffer bb = pool.buffer(id);
            bb.clear();
            bb.put(c.held, 0, c.heldCount);
            int n;
            try {
                n = c.socket.read(bb);
            } catch (IOException e) {
                pool.release(id);
                throw e;
            }
            if (n <= 0) {
                pool.release(id);
                if (n == 0) {
                    return End.OPEN;
                }
                if (c.orderly) {
                    return End.CLOSED;
                }
                throw NioFailure.PEER_CLOSED.exception("node " + c.peer() + " closed the connection");
            }
            c.lastRead = now;
            counters.bytesReceived.addAndGet(n);
            c.heldCount = 0;
            int length;
            try {
                length = records(c, bb, bb.position());
            } catch (NioException e) {
                pool.release(id);
                throw e;
            }
            if (length == 0) {
                pool.release(id);
            } else {
                IncomingBuffer b = new IncomingBuffer(c.peer(), pool.address(id), length, c.id(), id, releaser);
                if (!listener.onBuffer(b)) {
                    c.stall(b);
                    return End.OPEN;
                }
            }
            if (c.orderly) {
                return End.GOODBYE; // the sender's goodbye was in this read
            }
            if (bb.position() < bb.capacity()) {
                return End.OPEN; // the socket had no more
            }
        }
        return End.OPEN;
    }

    /** The way back of an outgoing channel: control words only. */
    End readControl(NioChannel c, long now) throws IOException {
        int n = c.socket.read(c.small);
        if (n < 0) {
            if (c.goodbyeSent()) {
                return End.CLOSED; // the peer read our goodbye
            }
            throw NioFailure.PEER_CLOSED.exception("node " + c.peer() + " closed the connection");
        }
        if (n == 0) {
            return End.OPEN;
        }
        c.lastRead = now;
        ByteBuffer b = c.small;
        b.flip();
        while (b.remaining() >= 4) {
            control(c, b.getInt());
        }
        b.compact();
        return End.OPEN;
    }

    /**
     * Walks the records in {@code b[0, length)} once: data records stay,
     * control words are handled and cut out, a word split at the end is held
     * back for the next read. Data behind a cut word moves down once, to where
     * the data kept so far ends, so a read costs time linear in its length
     * however many control words it holds. Returns the bytes of data left at
     * the start of the buffer.
     */
    int records(NioChannel c, ByteBuffer b, int length) throws NioException {
        int pos = 0; // next byte to look at
        int kept = 0; // data kept so far: b[0, kept)
        int keepAlives = 0; // counted once per read: a read may hold thousands
        try {
            while (pos < length) {
                if (c.recordLeft > 0) {
                    int k = Math.min(c.recordLeft, length - pos);
                    if (kept != pos) {
                        moveDown(b, pos, kept, k);
                    }
                    pos += k;
                    kept += k;
                    c.recordLeft -= k;
                    continue;
                }
                if (length - pos < 4) {
                    c.heldCount = length - pos;
                    for (int i = 0; i < c.heldCount; i++) {
                        c.held[i] = b.get(pos + i);
                    }
                    return kept;
                }
                int word = b.getInt(pos);
                if (word < 0) {
                    if (word == NioWire.KEEP_ALIVE && !c.isPeerLeaving() && !c.awaitsFinalCount()) {
                        keepAlives++; // what control() does with it, without a shared counter per word
                    } else {
                        control(c, word);
                    }
                    pos += 4;
                    continue;
                }
                if (word < 4 || word > NioWire.MAX_RECORD) {
                    throw protocol("record of " + word + " bytes from node " + c.peer());
                }
                c.recordLeft = (word + 3) & -4;
            }
            return kept;
        } finally {
            if (keepAlives > 0) {
                counters.keepAlives.addAndGet(keepAlives);
            }
        }
    }

    /**
     * Copies {@code b[from, from + n)} to {@code b[to, to + n)}, {@code to < from}:
     * front to back, so each byte is read before it can be overwritten.
     */
    private void moveDown(ByteBuffer b, int from, int to, int n) {
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            b.putLong(to + i, b.getLong(from + i));
        }
        for (; i < n; i++) {
            b.put(to + i, b.get(from + i));
        }
        bytesMoved += n;
    }

    /** One control word, in either direction (the direction decides which words are legal). */
    private void control(NioChannel c, int word) throws NioException {
        if (c.awaitsFinalCount()) {
            if (c.finalCountWord(word) && !c.flow.confirmFinal(c.finalCount())) {
                throw protocol("node " + c.peer() + " confirms " + c.finalCount() + " bytes, more than "
                        + c.flow.unconfirmed() + " sent and unconfirmed");
            }
            return;
        }
        if (c.isPeerLeaving()) {
            throw protocol("control word after node " + c.peer() + " said it shuts down");
        }
        if (word == NioWire.FINAL || word == NioWire.LEAVING) {
            // FINAL comes back to a sender (it has a window), LEAVING goes with the data.
            if ((word == NioWire.FINAL) != (c.flow != null)) {
                throw protocol("shutdown word for the other direction from node " + c.peer());
            }
            c.peerLeaving(word == NioWire.FINAL);
            return;
        }
        if (word >= 0) {
            throw protocol("a data record where only control words may come (node " + c.peer() + ")");
        }
        if (word == NioWire.GOODBYE) {
            c.peerSaidGoodbye();
            return;
        }
        int units = word & 0x7FFFFFFF;
        if (units > 0) {
            if (c.flow == null) {
                throw protocol("flow-control confirmation from the sending side (node " + c.peer() + ")");
            }
            c.flow.confirm(units);
        } else {
            counters.keepAlives.incrementAndGet();
        }
    }

    /** Messages say "protocol error" as they always did: the log and the loss event name it. */
    private static NioException protocol(String what) {
        return NioFailure.PROTOCOL.exception("protocol error: " + what);
    }
}
