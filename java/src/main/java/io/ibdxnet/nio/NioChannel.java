package io.ibdxnet.nio;

import io.ibdxnet.transport.OutgoingRingBuffer;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.RingConnection;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.util.concurrent.CompletableFuture;

/**
 * One TCP connection of the NIO transport. Outgoing channels (opened by this
 * node) carry our frames from the ring and receive control words; incoming
 * channels carry the peer's frames and return control words. Fields without
 * a comment are touched by the selector thread only.
 */
final class NioChannel extends RingConnection {
    enum State { CONNECTING, HANDSHAKE, OPEN, CLOSING, CLOSED }

    /** Incoming: the stream's id ({@link IncomingBuffer#connection}); kept across a graceful replacement. */
    int id;
    final boolean outgoing;
    final SocketChannel socket;
    SelectionKey key;
    volatile State state;
    /** The peer (for incoming channels known after the hello; {@link RingConnection#node} is the connect target). */
    int peer;
    long instance;
    long deadline;
    long lastRead;
    long lastWrite;
    /** Last send (any thread; coarse, for least-recently-used eviction). */
    volatile long lastUse;
    /** Until the handshake is done: its state. */
    NioHandshake.Pending handshake;
    /** Incoming: the peer's IP address (checked against the node table). */
    java.net.InetAddress remoteAddress;
    /** Outgoing, closing on purpose: the goodbye is written, the peer's close is awaited. */
    boolean goodbyeSent;
    /** The peer said it shuts down (LEAVING or FINAL): its close is not a failure. */
    boolean peerLeaving;
    /** Words of a FINAL confirmation still to read, and the value read so far. */
    int finalWords;
    long finalBytes;

    // Outgoing only (RingConnection: ring, window, writers). Completes when the handshake succeeded, or with the reason it failed. */
    final CompletableFuture<Void> established = new CompletableFuture<>();
    private final ByteBuffer[] ringViews;
    private long writeLeft;

    /** Control words, hello and reply to write (fill mode). */
    final ByteBuffer control = ByteBuffer.allocate(64);
    /** Hello, reply and control words read (fill mode). */
    final ByteBuffer small = ByteBuffer.allocate(256);

    // Incoming only: the record being skipped and a word split across reads.
    int recordLeft;
    final byte[] held = new byte[3];
    int heldCount;
    /** A buffer the core refused (full): offered again before reading more. */
    IncomingBuffer refused;
    /** Reading paused: no free receive buffer or {@link #refused} pending. */
    boolean stalled;

    private NioChannel(int id, int node, boolean outgoing, SocketChannel socket, ByteBuffer ring, FlowWindow flow) {
        super(node, ring == null ? null : new OutgoingRingBuffer(Memory.address(ring), ring.capacity()), flow);
        this.id = id;
        this.outgoing = outgoing;
        this.socket = socket;
        this.peer = node;
        this.ringViews = ring == null ? null : new ByteBuffer[] {ring.duplicate(), ring.duplicate()};
    }

    static NioChannel outgoing(int id, int node, SocketChannel socket, int ringSize, FlowWindow flow) {
        NioChannel c = new NioChannel(id, node, true, socket, ByteBuffer.allocateDirect(ringSize), flow);
        c.state = State.CONNECTING;
        return c;
    }

    static NioChannel incoming(int id, SocketChannel socket) {
        NioChannel c = new NioChannel(id, -1, false, socket, null, null);
        c.state = State.HANDSHAKE;
        return c;
    }

    boolean isClosed() {
        return state == State.CLOSED || orb != null && orb.isClosed();
    }

    /** True when nothing is half-written (control words may go out only between records). */
    boolean betweenRecords() {
        return writeLeft == 0;
    }

    /**
     * Writes pending control bytes and published ring data (many frames in
     * one gathering write). Returns the bytes written; {@link #fullyWritten}
     * says whether the socket took everything.
     */
    long flush(long now) throws IOException {
        long total = 0;
        while (true) {
            if (writeLeft == 0 && control.position() > 0) {
                control.flip();
                total += socket.write(control);
                boolean done = !control.hasRemaining();
                control.compact();
                if (!done) {
                    break;
                }
            }
            if (writeLeft == 0) {
                if (orb == null || (state != State.OPEN && state != State.CLOSING)) {
                    break;
                }
                writeLeft = orb.readyToPost();
                if (writeLeft == 0) {
                    break;
                }
            }
            long n = writeRing();
            total += n;
            if (writeLeft > 0) {
                break; // the socket is full
            }
        }
        if (total > 0) {
            lastWrite = now;
        }
        return total;
    }

    private long writeRing() throws IOException {
        int capacity = orb.capacity();
        int offset = orb.postOffset();
        int first = (int) Math.min(writeLeft, capacity - offset);
        ByteBuffer a = ringViews[0];
        a.limit(capacity).position(offset);
        a.limit(offset + first);
        long n;
        if (first < writeLeft) {
            ByteBuffer b = ringViews[1];
            b.position(0).limit((int) (writeLeft - first));
            n = socket.write(ringViews, 0, 2);
        } else {
            n = socket.write(a);
        }
        if (n > 0) {
            writeLeft -= n;
            orb.posted(n);
            orb.confirmed(n); // in the kernel's hands: the ring space is free again
        }
        return n;
    }

    /** True if nothing is left to write right now. */
    boolean fullyWritten() {
        return writeLeft == 0 && control.position() == 0 && (orb == null || orb.readyToPost() == 0);
    }
}
