package io.ibdxnet.transport;

import io.ibdxnet.memory.Memory;
/**
 * The outgoing ring buffer (ORB) of one connection, over the connection's
 * native send ring, extended with the <em>front posted</em> pointer (paper
 * §8.2). Positions are absolute byte counts; the ring index is
 * {@code position & mask}.
 *
 * <pre>
 *   front ........ frontPosted ........ back ........ reserved ........ front + capacity
 *   posted, not confirmed | ready, not posted | being written | free
 * </pre>
 *
 * The ring holds <em>records</em> aligned to 4 bytes whose first 4 bytes are
 * the record length (big-endian, without the alignment padding; never 0).
 * Many threads write concurrently and lock-free: {@link #reserve} claims
 * space with a CAS, the writer fills the record behind its first word (a
 * copied frame with {@link #write}, or a message serialised in place with
 * the {@code put} methods), and {@link #publish} stores that word last
 * (release). Nobody waits for earlier writers: the send thread finds the
 * published prefix itself ({@link #readyToPost}) by walking record lengths
 * from {@code back} until a zero word, and zeroes confirmed space
 * ({@link #confirmed}) so a stale word is never mistaken for a published
 * one. The producers' counter and the send thread's pointers live on
 * separate cache lines ({@link RingLayout}).
 *
 * <p>Every access by address ({@link Memory}, unchecked) stays inside
 * {@code [front, reserved)}: a producer touches only the record it
 * reserved, until it publishes; the send thread reads and zeroes only what
 * was reserved, published or confirmed: inside the ring's memory, which
 * the ring keeps reachable (mapped), and committed where it must be (a
 * {@link RingMemory} file ring): reservations end at or below
 * {@code commitLimit} ({@link #commitFor}). {@link #releaseIfIdle} gives
 * pages back only while {@code [front, reserved)} is empty and no
 * reservation can be made.
 */
public final class OutgoingRingBuffer extends RingProducerSide {
    // ---- send thread only: releaseIfIdle's view of the ring ----
    /** {@code reserved} when last seen idle, and since when; -1 when last seen busy. */
    private long idlePosition = -1;
    private long idleSince;
    /** {@code reserved} when the pages were last given back (a new ring has none to give). */
    private long releasedAt;

    /** A ring over {@code capacity} zeroed bytes (a power of two) of native memory at {@code address}. */
    public OutgoingRingBuffer(long address, int capacity) {
        super(address, capacity, null);
    }

    /**
     * A ring over {@code memory} (zeroed, a power of two), which it keeps
     * reachable (see {@link RingMemory}); its pages are given back when idle
     * if it can, and committed ahead of the producers if it must be.
     */
    public OutgoingRingBuffer(RingMemory memory) {
        super(memory.address, memory.size, memory);
    }

    // ---- send thread only ----

    private int lengthAt(long position) {
        // Safe: callers read below reserved (reserved, so committed); the send thread never runs a release meanwhile.
        return bigEndian(Memory.getIntVolatile(address + (position & mask)));
    }

    /** Bytes published and not yet posted (walks newly published records). */
    public long readyToPost() {
        long limit = reserved & ~RELEASING; // flagged by a producer's grow: positions below map alike (tryGrow)
        while (back < limit) {
            int len = lengthAt(back);
            if (len == 0) {
                break;
            }
            back += aligned(len);
        }
        return back - frontPosted;
    }

    /** Bytes ready to post from {@link #postOffset} in one piece: up to the window's end. */
    public long postable() {
        return Math.min(readyToPost(), mask + 1 - postOffset());
    }

    /**
     * A copy of what was published and never posted, for resending on
     * another connection: whole records, from the start of the record the
     * engine posted only the head of (that head never reaches the peer's
     * messages: a receiver drops a connection's unfinished record when the
     * stream moves to the next connection). Empty if everything was posted.
     */
    public byte[] copyStranded() {
        readyToPost();
        int n = (int) (back - postRecordStart);
        byte[] out = new byte[n];
        long index = postRecordStart & mask;
        int first = (int) Math.min(n, mask + 1 - index);
        // Safe: published records below back (reserved: committed); send thread only, never during a release.
        Memory.copy(address + index, out, 0, first);
        if (first < n) {
            Memory.copy(address, out, first, n - first);
        }
        return out;
    }

    /** Ring offset where the next data to post starts. */
    public int postOffset() {
        return (int) (frontPosted & mask);
    }

    /**
     * The engine posted {@code n} more bytes; it may stop inside a record
     * (its work requests have a size of their own).
     */
    public void posted(long n) {
        long p = frontPosted + n;
        frontPosted = p;
        long s = postRecordStart;
        while (s < p) {
            int len = lengthAt(s); // at or after postRecordStart: never zeroed
            if (len == 0) {
                throw new IllegalStateException("posted " + n + " bytes past the published records");
            }
            long next = s + aligned(len);
            if (next > p) {
                break; // p lies inside the record at s
            }
            s = next;
        }
        postRecordStart = s;
        freeConfirmed();
    }

    /**
     * The engine confirmed {@code n} more bytes sent: zero them and free
     * their space — but never the head of a record posted only in part: it is
     * kept until the whole record was posted, so a close in between can
     * resend the record whole ({@link #copyStranded}).
     */
    public void confirmed(long n) {
        confirmedUpTo += n;
        freeConfirmed();
    }

    private void freeConfirmed() {
        long f = front;
        long to = Math.min(confirmedUpTo, postRecordStart);
        long n = to - f;
        if (n <= 0) {
            return;
        }
        long index = f & mask;
        long first = Math.min(n, mask + 1 - index);
        // Safe: confirmed bytes, below reserved (committed), whose writers have published; send thread only.
        Memory.fill(address + index, first, (byte) 0);
        if (first < n) {
            Memory.fill(address, n - first, (byte) 0);
        }
        front = to;
        waiters.signal();
    }

    /** The first byte not yet freed (for tests). */
    long frontPosition() {
        return front;
    }

    /** The end of what was reserved (for tests). */
    long reservedPosition() {
        return reserved;
    }

    /** Bytes posted and not yet confirmed. */
    public long inFlight() {
        return frontPosted - confirmedUpTo;
    }

    /** True if everything reserved was confirmed (false while the pages are being given back). */
    public boolean isDrained() {
        return front == reserved;
    }

    /**
     * True if everything reserved was posted (handed to the network). Any
     * thread, for a poll: the send thread's latest post becomes visible
     * eventually, never early.
     */
    public boolean isAllPosted() {
        long r = reserved;
        return (long) FRONT_POSTED.getOpaque(this) - r >= 0;
    }

    /**
     * Gives the ring's pages back ({@link RingMemory}: mapped memory or a
     * file ring) if it has been empty — everything reserved confirmed — since
     * an earlier call at least {@code idleNanos} before {@code now} and was
     * used since its pages were last given back. Send thread only (so nothing
     * is posted or confirmed meanwhile); never on a hot path: the send
     * thread's housekeeping calls it about once a second. True if it did.
     *
     * <p>Producers are excluded by a CAS of {@code reserved} from the idle
     * position {@code front} to the same with {@link #RELEASING} set: it
     * fails if any producer reserved since (that producer's record is then in
     * the ring: not idle), and once it succeeded every reservation waits
     * (see {@link #RELEASING}) until {@code reserved} is set again. Every
     * record reserved before was published, posted and confirmed (front
     * reached it), so no producer, socket write or pump copy touches the
     * memory while its pages go — which a file ring needs (a touch of its
     * truncated file is a {@code SIGBUS}), and so does the zero-word walk
     * (a record written during an {@code madvise} would be lost).
     *
     * <p>Afterwards every position moves on by one capacity (the same ring
     * index; the ring is empty, so nothing else changes): a producer that
     * read {@code reserved} before the release fails its CAS and reads it
     * again, with the {@code commitLimit} the release left. A release that
     * leaves the memory unusable (a file ring's file left truncated: an
     * {@link IllegalStateException} from {@link RingMemory#releasePages})
     * closes the ring and keeps the flag: nothing touches it again.
     */
    public boolean releaseIfIdle(long now, long idleNanos) {
        if (memory == null || !memory.releasable() || closed) {
            return false;
        }
        long r = reserved;
        if (r != front) {
            idlePosition = -1;
            return false;
        }
        if (r != idlePosition) {
            idlePosition = r;
            idleSince = now;
            return false;
        }
        if (r == releasedAt || now - idleSince < idleNanos || !RESERVED.compareAndSet(this, r, r | RELEASING)) {
            return false;
        }
        long next = r + capacity;
        boolean released;
        synchronized (commitLock) {
            try {
                released = memory.releasePages();
            } catch (IllegalStateException e) {
                close(); // reserved keeps the flag: no reservation, no commit, no touch any more
                return false;
            }
            if (released && memory.commitsAhead()) {
                commitBase = next & -COMMIT_PAGE;
                commitLimit = commitBase;
            }
        }
        if (released) {
            releasedAt = next;
            mask = startMask(); // its pages are gone: start small again (the ring is empty, all zero)
        }
        moveOn(next);
        return released;
    }

    /**
     * Moves an empty ring on to the next index 0 (send thread only): a
     * connection with few records at a time keeps to its ring's first pages,
     * so its memory is touched only as far as its backlog ever reached (the
     * ib rings: registered memory, never given back). Producers are
     * excluded as in {@link #releaseIfIdle}; not for a ring that commits
     * ahead (a file ring). True if it moved.
     */
    public boolean rewindIfEmpty() {
        long r = reserved;
        if (r != front || (r & (capacity - 1)) == 0 || closed || (memory != null && memory.commitsAhead())
                || !RESERVED.compareAndSet(this, r, r | RELEASING)) {
            return false;
        }
        moveOn((r + capacity) & -(long) capacity);
        return true;
    }

    /** An empty ring's positions, all to {@code next}; {@code reserved} (flagged) last. */
    private void moveOn(long next) {
        confirmedUpTo = next;
        postRecordStart = next;
        frontPosted = next;
        back = next;
        front = next;
        reserved = next; // after everything above: a producer that reads it sees the ring as the move left it
        waiters.signal();
    }

    /** Bytes of the ring's memory resident now (whole pages), -1 if unknown (see {@link RingMemory#resident}). */
    public long resident() {
        return memory == null ? -1 : memory.resident();
    }
}
