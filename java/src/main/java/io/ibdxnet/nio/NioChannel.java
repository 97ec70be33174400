package io.ibdxnet.nio;

import io.ibdxnet.transport.OutgoingRingBuffer;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.nio.NioFailure.NioException;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.RingConnection;
import io.ibdxnet.transport.RingMemory;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One TCP connection of the NIO transport. Outgoing channels (opened by this
 * node) carry our frames from the ring and receive control words; incoming
 * channels carry the peer's frames and return control words.
 *
 * <p>The connection's state changes only through the methods below
 * (CONNECTING → HANDSHAKE → OPEN → CLOSING → CLOSED; an incoming channel
 * starts in HANDSHAKE), so each transition does everything it implies in
 * one place. Everything but {@link #state()}, {@link #lastUse} and the ring
 * belongs to the selector thread, except the sending side of an outgoing
 * channel (the ring's send-thread side, {@code writeLeft}, {@link #lastWrite}
 * and the socket's writes), which belongs to whoever holds its write lock:
 * the selector thread, or a sender writing its own frame at once
 * ({@link #writeNow}).
 */
final class NioChannel extends RingConnection {
    enum State { CONNECTING, HANDSHAKE, OPEN, CLOSING, CLOSED }

    final boolean outgoing;
    final SocketChannel socket;
    /** Incoming: the peer's IP address (checked against the node table). */
    final InetAddress remoteAddress;
    /** Connect or handshake deadline. */
    long deadline;
    long lastRead;
    /**
     * When bytes last went out: set under the write lock (by a sender's
     * {@link #writeNow} too), read by senders without it (opaque: a stale
     * value only decides who writes the next frame).
     */
    long lastWrite;
    /** Last send (any thread; coarse, for least-recently-used eviction). */
    volatile long lastUse;
    /** Until the handshake is done: its state (owned by {@link NioHandshake}). */
    NioHandshake.Pending handshake;

    /** Outgoing: completes when the handshake succeeded, or with the reason it failed. */
    final CompletableFuture<Void> established = new CompletableFuture<>();
    /** Control words, hello and reply to write (fill mode). */
    final ByteBuffer control = ByteBuffer.allocate(64);
    /** Hello, reply and control words read (fill mode). */
    final ByteBuffer small = ByteBuffer.allocate(256);

    // Incoming, the record reader's position: the record being skipped and a word split across reads.
    int recordLeft;
    final byte[] held = new byte[3];
    int heldCount;

    private volatile State state;
    private SelectionKey key;
    /** Incoming: the stream's id ({@link IncomingBuffer#connection}); kept across a graceful replacement. */
    private int id;
    /** The peer (for incoming channels known after the hello; {@link RingConnection#node} is the connect target). */
    private int peer;
    private long instance;
    /** Outgoing, closing on purpose: the goodbye is written, the peer's close is awaited. */
    private boolean goodbyeSent;
    /** The peer said it shuts down (LEAVING or FINAL): its close is not a failure. */
    private boolean peerLeaving;
    /** Words of a FINAL confirmation still to read, and the value read so far. */
    private int finalWords;
    private long finalBytes;
    /** A buffer the core refused (full): offered again before reading more. */
    private IncomingBuffer refused;
    /** Reading paused: no free receive buffer or {@link #refused} pending. */
    private boolean stalled;

    private final ByteBuffer[] ringViews;
    private long writeLeft;
    /** Held while the sending side is used: the selector thread waits for it, a sender only tries. */
    private final AtomicBoolean writeLock = new AtomicBoolean();
    /** What {@link #fullyWritten} says: computed under the lock by the last {@link #flush}. */
    private boolean flushedAll = true;
    private static final java.lang.invoke.VarHandle LAST_WRITE;

    static {
        try {
            LAST_WRITE = java.lang.invoke.MethodHandles.lookup().findVarHandle(NioChannel.class, "lastWrite", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private NioChannel(int id, int node, boolean outgoing, SocketChannel socket, InetAddress remote, RingMemory memory,
            FlowWindow flow, State state) {
        super(node, memory == null ? null : new OutgoingRingBuffer(memory), flow);
        this.id = id;
        this.outgoing = outgoing;
        this.socket = socket;
        this.remoteAddress = remote;
        this.peer = node;
        this.state = state;
        this.ringViews = memory == null ? null : new ByteBuffer[] {memory.buffer.duplicate(), memory.buffer.duplicate()};
    }

    static NioChannel outgoing(int node, SocketChannel socket, int ringSize, FlowWindow flow) {
        RingMemory ring = RingMemory.allocate(ringSize,
                "the ring of the connection to node " + node + " (nioRingSize = " + ringSize + ")");
        return new NioChannel(0, node, true, socket, null, ring, flow, State.CONNECTING);
    }

    static NioChannel incoming(int id, SocketChannel socket, InetAddress remote) {
        return new NioChannel(id, -1, false, socket, remote, null, null, State.HANDSHAKE);
    }

    State state() {
        return state;
    }

    int id() {
        return id;
    }

    int peer() {
        return peer;
    }

    long instance() {
        return instance;
    }

    boolean isClosed() {
        return state == State.CLOSED || orb != null && orb.isClosed();
    }

    /** The peer's socket address for messages ("?" once closed). */
    String remote() {
        try {
            return String.valueOf(socket.getRemoteAddress());
        } catch (IOException e) {
            return "?";
        }
    }

    // ---- transitions ----

    void register(Selector selector, int ops) throws IOException {
        key = socket.register(selector, ops, this);
    }

    /** Outgoing: TCP is connected, the handshake starts. */
    void connected() {
        state = State.HANDSHAKE;
        key.interestOps(SelectionKey.OP_READ);
    }

    /** Outgoing: the peer accepted us; frames written while connecting may go out. */
    void open() {
        handshake = null;
        small.clear();
        state = State.OPEN;
        established.complete(null);
    }

    /**
     * Incoming: the peer passed the handshake; its stream starts, under
     * {@code streamId} (the id of the stream it continues, or this channel's).
     */
    void open(int source, long peerInstance, int streamId) {
        peer = source;
        instance = peerInstance;
        id = streamId;
        small.clear();
        state = State.OPEN;
    }

    /**
     * Outgoing, evicted: senders that have not written retry on a new
     * connection; what was published is flushed, then {@link #sayGoodbye}.
     */
    void startClosing() {
        orderly = true;
        orb.close();
        state = State.CLOSING;
    }

    /** Queues the goodbye once (after the last record). True if it was queued now. */
    boolean sayGoodbye() {
        if (goodbyeSent || control.remaining() < 4) {
            return false;
        }
        goodbyeSent = true;
        control.putInt(NioWire.GOODBYE);
        return true;
    }

    boolean goodbyeSent() {
        return goodbyeSent;
    }

    /** Incoming: the sender closes this connection in order (its stream continues on its next one). */
    void peerSaidGoodbye() {
        orderly = true;
    }

    /** The peer shuts down (LEAVING, or FINAL followed by two words of its count). */
    void peerLeaving(boolean withFinalCount) {
        peerLeaving = true;
        finalWords = withFinalCount ? 2 : 0;
    }

    boolean isPeerLeaving() {
        return peerLeaving;
    }

    /** The peer shut down and its final count (if any) was read in full. */
    boolean peerLeft() {
        return peerLeaving && finalWords == 0;
    }

    boolean awaitsFinalCount() {
        return finalWords > 0;
    }

    /** One word of the FINAL count; true once both are read ({@link #finalCount}). */
    boolean finalCountWord(int word) {
        finalBytes = finalBytes << 32 | (word & 0xFFFFFFFFL);
        return --finalWords == 0;
    }

    /** The bytes the peer handled beyond its last confirmation, as its FINAL words say (any value: checked by the caller). */
    long finalCount() {
        return finalBytes;
    }

    /**
     * Closes the socket; senders waiting for the connection learn {@code why}.
     * The transport's tables are the caller's.
     */
    void closed(NioException why) {
        state = State.CLOSED;
        if (key != null) {
            key.cancel();
        }
        lockWrites(); // a sender's writeNow ends first; later ones see CLOSED
        try {
            socket.close();
        } catch (IOException e) {
            // closing anyway
        } finally {
            unlockWrites();
        }
        if (outgoing) {
            orb.close();
            established.completeExceptionally(why);
        }
        if (refused != null) {
            refused.release();
            refused = null;
        }
    }

    // ---- reading paused while the core is full ----

    /** Stops reading until {@link #resume}: no receive buffer, or the core is full. */
    void stall() {
        if (!stalled) {
            stalled = true;
            key.interestOps(key.interestOps() & ~SelectionKey.OP_READ);
        }
    }

    /** Keeps {@code b} to offer again, and stops reading. */
    void stall(IncomingBuffer b) {
        refused = b;
        stall();
    }

    boolean isStalled() {
        return stalled;
    }

    void resume() {
        stalled = false;
        key.interestOps(key.interestOps() | SelectionKey.OP_READ);
    }

    /** The buffer the core refused last (offered again before reading more), or null. */
    IncomingBuffer refused() {
        return refused;
    }

    /** The core took {@link #refused} after all. */
    void clearRefused() {
        refused = null;
    }

    // ---- writing ----

    /** True when nothing is half-written (control words may go out only between records). */
    boolean betweenRecords() {
        lockWrites();
        try {
            return writeLeft == 0;
        } finally {
            unlockWrites();
        }
    }

    /**
     * Writes pending control bytes and published ring data (many frames in
     * one gathering write). Returns the bytes written; {@link #fullyWritten}
     * says whether the socket took everything.
     */
    long flush(long now) throws IOException {
        lockWrites();
        try {
            return flushLocked(now);
        } finally {
            unlockWrites();
        }
    }

    private long flushLocked(long now) throws IOException {
        long total = writeOut(true);
        if (total > 0) {
            LAST_WRITE.setOpaque(this, now);
        }
        flushedAll = writeLeft == 0 && control.position() == 0 && (orb == null || orb.readyToPost() == 0);
        return total;
    }

    /**
     * Writes published ring data, and with {@code withControl} the pending
     * control words between records, until the socket is full or nothing is
     * left (write lock held). The bytes written.
     */
    private long writeOut(boolean withControl) throws IOException {
        long total = 0;
        while (true) {
            if (withControl && writeLeft == 0 && control.position() > 0) {
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
                writeLeft = orb.postable(); // up to the window's end: writeRing wraps at the capacity
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

    /** True if the last {@link #flush} left nothing to write (selector thread). */
    boolean fullyWritten() {
        return flushedAll;
    }

    /**
     * A sender writes what its ring holds now, on its own thread, if nobody
     * else writes (the selector thread, another sender): the frame it just
     * published leaves without a hand-off. Ring data only: control words stay
     * the selector thread's (it writes them between records). True if the
     * ring was written out in full; false if the selector thread must go on
     * (the lock was taken, the channel is not open, the socket is or was
     * full, or it failed: the selector thread finds out on its own write).
     */
    boolean writeNow(java.util.concurrent.atomic.AtomicLong bytesSent) {
        if (state != State.OPEN || !writeLock.compareAndSet(false, true)) {
            return false;
        }
        try {
            if (state != State.OPEN || writeLeft != 0) {
                return false; // a record half-written: the socket was full, the selector thread waits for room
            }
            long total = writeOut(false);
            if (total > 0) {
                LAST_WRITE.setOpaque(this, System.nanoTime());
                bytesSent.addAndGet(total);
            }
            return writeLeft == 0;
        } catch (IOException e) {
            return false;
        } finally {
            writeLock.setRelease(false);
        }
    }

    /** Nobody writes on this channel now, nor wrote within {@code gapNanos}: a sender may {@link #writeNow}. */
    boolean idleFor(long gapNanos) {
        return !writeLock.get() && System.nanoTime() - (long) LAST_WRITE.getOpaque(this) > gapNanos;
    }

    /** An idle ring gives its pages back (housekeeping) unless a sender writes from it right now. */
    void releaseRingIfIdle(long now, long idleNanos) {
        if (writeLock.compareAndSet(false, true)) {
            try {
                orb.releaseIfIdle(now, idleNanos);
            } finally {
                writeLock.setRelease(false);
            }
        }
    }

    /** Selector thread: waits out a sender's {@link #writeNow} (one non-blocking write). */
    private void lockWrites() {
        int spins = 0;
        while (!writeLock.compareAndSet(false, true)) {
            if (++spins < 100) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }

    private void unlockWrites() {
        writeLock.setRelease(false);
    }

    /** Asks the selector for writability exactly while something is left to write. */
    void wantWrite(boolean want) {
        if (!key.isValid()) {
            return;
        }
        int ops = key.interestOps();
        int next = want ? ops | SelectionKey.OP_WRITE : ops & ~SelectionKey.OP_WRITE;
        if (next != ops) {
            key.interestOps(next);
        }
    }

    boolean keyValid() {
        return key != null && key.isValid();
    }
}
