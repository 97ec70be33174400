package io.ibdxnet.core;

import io.ibdxnet.memory.Memory;
import io.ibdxnet.transport.IdleStrategy;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.NodeRefs;
import io.ibdxnet.transport.Transport;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The incoming buffer queue (paper §2.3), one lane per source node: received
 * buffers wait here for the message creation coordinator, which takes them
 * round-robin across sources (one buffer per turn), in order within each.
 *
 * <p>Bounds: each source may hold {@code sourceMaxBuffers} and
 * {@code sourceMaxBytes}, the node {@code maxBuffers} and {@code maxBytes};
 * a source with nothing here may always add one buffer (its guaranteed
 * minimum). A buffer beyond them is refused and stays in its transport,
 * which stops reading that source (backpressure on that source only).
 *
 * <p>A transport that cannot stop one source ({@link #fitTo}: the RDMA
 * engine's incoming ring is shared by every source, so a refusal would stop
 * them all) never has a buffer refused: beyond the bounds it is kept outside
 * them, and a source that already holds {@code sourceMaxBuffers} receive
 * buffers gets the next ones copied out, so the receive buffers go back at
 * once and one source never holds more than its share of them. What a source
 * has here beyond its share is bounded by its flow-control window (nothing it
 * sent is confirmed before it was parsed).
 *
 * <p>A lane may be held ({@link #giveBack}) while its source has no room
 * downstream or waits for the node's unfinished budget, and
 * {@link #resume resumed} later; a held lane keeps its buffers and is
 * skipped, but keeps at most one receive buffer (the rest is copied out):
 * held sources must not pin the receive buffers the others read into.
 */
public final class IncomingBufferQueue {
    private final int maxBuffers;
    private final long maxBytes;
    /** Under the lock (lowered once by {@link #fitTo}). */
    private int sourceMaxBuffers;
    private final long sourceMaxBytes;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition notEmpty = lock.newCondition();
    /** Lanes that have a buffer and are neither being handled nor held, in turn order. */
    private final ArrayDeque<Lane> ready = new ArrayDeque<>();
    private final NodeRefs<Lane> lanes = new NodeRefs<>();
    /** Buffers and bytes within the node's bounds (under the lock; bytes also read as a gauge). */
    private int buffers;
    private volatile long bytes;
    /** Bytes in the lanes kept beyond their source's share (spill mode; a gauge, written under the lock). */
    private volatile long beyondShare;
    /** The consumer is to return from its wait at once ({@link #wake}). */
    private boolean wakeUp;
    private final AtomicLong spilledBuffers = new AtomicLong();
    private final AtomicLong spilledBytes = new AtomicLong();
    private volatile boolean spillOverShare;
    /** The (one) consumer's last poll found nothing. */
    private boolean timedOut;
    /** Made once: a method reference per poll would allocate per buffer. */
    private final java.util.function.Supplier<IncomingBuffer> takeNow = () -> {
        try {
            return take(0);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    };

    public IncomingBufferQueue(int maxBuffers, long maxBytes, int sourceMaxBuffers, long sourceMaxBytes) {
        this.maxBuffers = maxBuffers;
        this.maxBytes = maxBytes;
        this.sourceMaxBuffers = Math.min(sourceMaxBuffers, maxBuffers);
        this.sourceMaxBytes = Math.min(sourceMaxBytes, maxBytes);
    }

    /**
     * Fits the shares to the transport: a source holds at most an eighth of the
     * receive buffers all sources share ({@link Transport#receiveBuffers}, at
     * least 2), and where refusing one source would stop them all
     * ({@link Transport#holdsBackOneSource} false) buffers beyond a source's
     * share are kept, copied out once it holds its share of receive buffers.
     */
    public void fitTo(Transport t) {
        lock.lock();
        try {
            sourceMaxBuffers = Math.min(sourceMaxBuffers, Math.max(2, t.receiveBuffers() / 8));
            spillOverShare = !t.holdsBackOneSource();
        } finally {
            lock.unlock();
        }
    }

    /** Test access: the same as {@link #fitTo} with a transport that cannot hold back one source. */
    void spillOverShare(boolean on) {
        this.spillOverShare = on;
    }

    /** A queued buffer and how it is accounted. */
    private static final class Entry {
        final IncomingBuffer buffer;
        /** Within the node's bounds (else kept beyond the source's share, spill mode). */
        final boolean counted;
        /** Holds a transport's receive buffer (else a copy). */
        final boolean received;

        Entry(IncomingBuffer buffer, boolean counted, boolean received) {
            this.buffer = buffer;
            this.counted = counted;
            this.received = received;
        }
    }

    /** One source's buffers. */
    private static final class Lane {
        final ArrayDeque<Entry> queue = new ArrayDeque<>();
        /** Buffers and bytes of {@link #queue} counted in the node's bounds. */
        int buffers;
        long bytes;
        /** Entries in {@link #queue} that hold a transport's receive buffer. */
        int received;
        /** The entry being handled (taken by the consumer), or null. */
        Entry current;
        boolean held;
    }

    private Lane lane(int source) {
        Lane l = lanes.get(source);
        if (l == null) {
            l = new Lane();
            lanes.set(source, l);
        }
        return l;
    }

    /** Adds a buffer unless its source or the node is full (see the class comment); never blocks. */
    public boolean offer(IncomingBuffer b) {
        lock.lock();
        try {
            Lane l = lane(b.source);
            boolean nothingHere = l.queue.isEmpty() && l.current == null;
            boolean sourceRoom = l.buffers < sourceMaxBuffers && l.bytes + b.length <= sourceMaxBytes;
            boolean nodeRoom = buffers < maxBuffers && bytes + b.length <= maxBytes;
            Entry e;
            if (nothingHere || (sourceRoom && nodeRoom)) {
                e = new Entry(b, true, true);
            } else if (spillOverShare) {
                // Refusing would stop every source (the shared ring): kept beyond the
                // node's bounds, copied out once the source holds its share of receive
                // buffers. Held sources' bytes filling the node must not stall the
                // sources that can go on (32 max-size senders, 29 waiting for the budget).
                IncomingBuffer copy = l.received >= sourceMaxBuffers ? copyOut(b) : null;
                e = copy != null ? new Entry(copy, false, false) : new Entry(b, false, true);
            } else {
                return false; // the transport holds it (and reads nothing more of that source meanwhile)
            }
            if (l.held && e.received) {
                e = copiedOut(e); // a held source pins no more receive buffers (see giveBack)
            }
            count(l, e, +1);
            l.queue.addLast(e);
            if (l.current == null && !l.held && l.queue.size() == 1) {
                ready.addLast(l);
                notEmpty.signal();
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Adds {@code b} held, as the first of its lane, whatever the bounds: its
     * source had nothing here, and {@code b} was parsed in part on the
     * transport's thread, where its stream stopped to wait (see {@link #resume}).
     */
    public void offerHeld(IncomingBuffer b) {
        lock.lock();
        try {
            Lane l = lane(b.source);
            Entry e = new Entry(b, true, true);
            count(l, e, +1);
            l.queue.addFirst(e);
            l.held = true;
            releaseReceiveBuffersOfHeld(l);
        } finally {
            lock.unlock();
        }
    }

    /** Moves {@code e}'s accounting into ({@code sign} +1) or out of (-1) its lane. */
    private void count(Lane l, Entry e, int sign) {
        if (e.received) {
            l.received += sign;
        }
        if (e.counted) {
            l.buffers += sign;
            l.bytes += sign * (long) e.buffer.length;
            buffers += sign;
            bytes += sign * (long) e.buffer.length;
        } else {
            beyondShare += sign * (long) e.buffer.length;
        }
    }

    /**
     * {@code b}'s bytes in memory of their own; its receive buffer goes back to
     * the transport now. Null if no memory is left for the copy (the receive
     * buffer is kept then).
     */
    private IncomingBuffer copyOut(IncomingBuffer b) {
        ByteBuffer copy;
        try {
            copy = ByteBuffer.allocateDirect(Math.max(1, b.length));
        } catch (OutOfMemoryError e) { // -XX:MaxDirectMemorySize reached: holding the receive buffer is the lesser harm
            return null;
        }
        long at = Memory.address(copy);
        Memory.copy(b.address, at, b.length);
        b.release();
        spilledBuffers.incrementAndGet();
        spilledBytes.addAndGet(b.length);
        // The releaser keeps the copy reachable until the bytes were parsed.
        return new IncomingBuffer(b.source, at, b.length, b.connection, 0, id -> copy.clear());
    }

    /**
     * The next buffer, round-robin across sources, waiting up to
     * {@code timeoutMs}; null if none came. One consumer thread only; it then
     * calls {@link #finished} or {@link #giveBack}. Yields for a moment before
     * blocking ({@link IdleStrategy#beforeBlocking}).
     */
    public IncomingBuffer poll(long timeoutMs) throws InterruptedException {
        // Yield only right after work: a consumer whose last wait timed out
        // blocks at once (an idle node must not yield 50 µs per timeout).
        IncomingBuffer b = timedOut ? take(0) : IdleStrategy.poll(takeNow);
        if (b == null) {
            b = take(TimeUnit.MILLISECONDS.toNanos(timeoutMs));
        }
        timedOut = b == null;
        return b;
    }

    private IncomingBuffer take(long nanos) throws InterruptedException {
        lock.lock();
        try {
            while (ready.isEmpty()) {
                if (nanos <= 0 || wakeUp) {
                    wakeUp = false;
                    return null;
                }
                nanos = notEmpty.awaitNanos(nanos);
            }
            Lane l = ready.pollFirst();
            Entry e = l.queue.pollFirst();
            l.current = e; // still counted in its lane's share until finished
            return e.buffer;
        } finally {
            lock.unlock();
        }
    }

    /** The consumer is done with the buffer it took: its source takes its next turn. */
    public void finished(IncomingBuffer b) {
        lock.lock();
        try {
            Lane l = lanes.get(b.source);
            count(l, l.current, -1);
            l.current = null;
            if (!l.held && !l.queue.isEmpty()) {
                ready.addLast(l);
                notEmpty.signal();
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * The consumer could not handle {@code b} now (its source has no room
     * downstream): it goes back to the front of its lane, which is held until
     * {@link #resume}. {@code b} stays unfinished.
     */
    public void giveBack(IncomingBuffer b) {
        lock.lock();
        try {
            Lane l = lanes.get(b.source);
            Entry e = l.current;
            l.current = null;
            l.queue.addFirst(e);
            l.held = true;
            releaseReceiveBuffersOfHeld(l);
        } finally {
            lock.unlock();
        }
    }

    /**
     * A held lane keeps one receive buffer at most, its first (which may be
     * parsed in part): the others are copied out and go back to their
     * transport at once. Held sources (no handler room, or waiting for the
     * node's unfinished budget) must not pin the receive buffers every source
     * shares: with 29 of 32 senders waiting for the budget they had taken
     * every pooled buffer, and the 3 that could go on had none left to read
     * into. Under the lock.
     */
    private void releaseReceiveBuffersOfHeld(Lane l) {
        if (l.received <= 1) {
            return;
        }
        ArrayDeque<Entry> kept = new ArrayDeque<>(l.queue.size());
        boolean first = true;
        for (Entry e : l.queue) {
            kept.addLast(first || !e.received ? e : copiedOut(l, e));
            first = false;
        }
        l.queue.clear();
        l.queue.addAll(kept);
    }

    /** {@code e} (in {@code l}'s queue) with its bytes copied out: its receive buffer goes back now. Under the lock. */
    private Entry copiedOut(Lane l, Entry e) {
        Entry c = copiedOut(e);
        if (c != e) {
            l.received--;
        }
        return c;
    }

    /** {@code e} with its bytes copied out (or {@code e} itself if no memory is left for a copy). */
    private Entry copiedOut(Entry e) {
        IncomingBuffer copy = copyOut(e.buffer);
        if (copy == null) {
            return e;
        }
        copy.parsed = e.buffer.parsed;
        return new Entry(copy, e.counted, false);
    }

    /** The consumer's wait ends now, with nothing (it has something else to look at). */
    public void wake() {
        lock.lock();
        try {
            wakeUp = true;
            notEmpty.signal();
        } finally {
            lock.unlock();
        }
    }

    /** {@code source} may be handled again (see {@link #giveBack}). */
    public void resume(int source) {
        lock.lock();
        try {
            Lane l = lanes.get(source);
            if (l == null || !l.held) {
                return;
            }
            l.held = false;
            if (l.current == null && !l.queue.isEmpty()) {
                ready.addLast(l);
                notEmpty.signal();
            }
        } finally {
            lock.unlock();
        }
    }

    /** True if every buffer offered was taken and handled. */
    public boolean idle() {
        lock.lock();
        try {
            for (int i = 0; i < lanes.length(); i++) {
                Lane l = lanes.get(i);
                if (l != null && (l.current != null || !l.queue.isEmpty())) {
                    return false;
                }
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * True if nothing of {@code source} waits here or is being handled (its
     * next buffer may be handled right away without passing one of its own).
     */
    public boolean idle(int source) {
        lock.lock();
        try {
            Lane l = lanes.get(source);
            return l == null || (l.queue.isEmpty() && l.current == null && !l.held);
        } finally {
            lock.unlock();
        }
    }

    /** Buffers queued or being parsed within the node's bounds (held lanes included; see {@link #bytesBeyondShare}). */
    public int size() {
        lock.lock();
        try {
            return buffers;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Bytes kept beyond their source's share (spill mode: the transport could
     * not hold that source back), outside the node's bounds; each source's are
     * unconfirmed, so at most its sender's flow-control window.
     */
    public long bytesBeyondShare() {
        return beyondShare;
    }

    /** Bytes waiting within the node's bounds. */
    public long bytes() {
        return bytes;
    }

    /** Buffers copied out of their receive buffers (spill mode, a source beyond its share). */
    public long spilledBuffers() {
        return spilledBuffers.get();
    }

    /** Bytes of {@link #spilledBuffers}. */
    public long spilledBytes() {
        return spilledBytes.get();
    }
}
