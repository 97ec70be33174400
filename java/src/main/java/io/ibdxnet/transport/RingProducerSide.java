package io.ibdxnet.transport;

import io.ibdxnet.memory.Memory;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * The producers' side of an {@link OutgoingRingBuffer}: reserving space
 * (waiting or not), writing and publishing a record, closing; the window
 * and its growth; committing a file ring's memory ahead of the producers.
 * The class comment of {@link OutgoingRingBuffer} states the protocol.
 */
abstract class RingProducerSide extends RingLayout.Pad3 {
    /** What {@link #reserve} returns for a closed ring (positions are never negative). */
    public static final long CLOSED = -1;
    /** What {@link #tryReserve} returns when the record would have to wait for room. */
    public static final long FULL = -2;

    /** Records start at multiples of this. */
    public static final int ALIGN = 4;
    static final VarHandle RESERVED;
    static final VarHandle FRONT_POSTED;
    /** Producers waiting for room, woken when space is confirmed or the ring closes. */
    final WaitList waiters = new WaitList();
    /**
     * Set in {@code reserved} during a release ({@link OutgoingRingBuffer#releaseIfIdle}): then
     * {@code reserved + size - front} exceeds any capacity, so reservations
     * wait or say {@link #FULL} with no test of their own (positions: < 2^62).
     */
    static final long RELEASING = 1L << 62;
    /** {@link #tryReserve} waits out the flag (spins, then yields) up to this before it says {@link #FULL}. */
    private static final int MOVE_SPINS = 256;
    private static final long MOVE_WAIT_NANOS = 20_000_000L;
    /**
     * A ring starts with a window of this many bytes (or its capacity if
     * smaller) and grows it, doubling, only while a producer waits for room
     * that a larger window would give: a record larger than the window, or a
     * full window of which half or more is posted and not yet confirmed
     * (the network's round trip, not the send thread, holds the stream up).
     * Rings that commit ahead (file rings) use their whole capacity.
     */
    public static final int START_WINDOW = 64 << 10;
    /** How long a ring stays empty before the transports' housekeeping gives its pages back ({@link OutgoingRingBuffer#releaseIfIdle}). */
    public static final long RELEASE_AFTER_NANOS = 1_000_000_000L;
    /** The memory when it can give its pages back (null: the caller's, e.g. the engine's registered ring). */
    final RingMemory memory;
    /** Commits are made in multiples of this (a page of 4 KiB; on larger pages the kernel commits whole pages anyway). */
    static final int COMMIT_PAGE = 4096;
    /** A commit takes at least this much, and as much as the ring committed since its last release, up to the max. */
    static final int MIN_COMMIT = 16 << 10;
    static final int MAX_COMMIT = 1 << 20;
    /** Serialises {@link #commitFor}, the release of the pages and the memory's close. */
    final Object commitLock = new Object();
    /** Where the memory committed since the last release starts (a position; guarded by commitLock). */
    long commitBase;

    static {
        try {
            RESERVED = MethodHandles.lookup().findVarHandle(RingLayout.ProducerFields.class, "reserved", long.class);
            FRONT_POSTED = MethodHandles.lookup().findVarHandle(RingLayout.ConsumerFields.class, "frontPosted", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    RingProducerSide(long address, int capacity, RingMemory memory) {
        super(address, checkedCapacity(capacity));
        this.memory = memory;
        this.commitLimit = memory != null && memory.commitsAhead() ? 0 : Long.MAX_VALUE;
        this.mask = startMask();
    }

    final long startMask() {
        return (memory != null && memory.commitsAhead() ? capacity : Math.min(capacity, START_WINDOW)) - 1;
    }

    private static int checkedCapacity(int capacity) {
        if (capacity < ALIGN || Integer.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("ring capacity " + capacity + " is not a power of two ≥ " + ALIGN);
        }
        return capacity;
    }
    public int capacity() {
        return capacity;
    }

    /** The bytes of the ring in use now (see {@link #START_WINDOW}). */
    public int window() {
        return (int) (mask + 1);
    }
    /** Bytes a record of {@code length} occupies. */
    public static int aligned(int length) {
        return (length + ALIGN - 1) & -ALIGN;
    }

    /**
     * Claims space for a record of {@code length} bytes (at least 4),
     * waiting (spinning, then parking) while the ring is full. Returns the
     * start position for {@link #write} and {@link #publish}, or
     * {@link #CLOSED} once the ring is closed (an expected end, not an
     * error). Fails if the record exceeds the capacity or
     * {@code deadlineNanos} (a {@link System#nanoTime} value) passes first,
     * and with {@link RingMemory.CommitFailed} (nothing reserved) if the
     * ring's memory must be committed first and cannot be.
     */
    public long reserve(int length, long deadlineNanos) throws InterruptedException, java.util.concurrent.TimeoutException {
        int size = aligned(length);
        if (length < ALIGN || size > capacity) {
            throw new IllegalArgumentException("cannot reserve " + length + " bytes in a ring of " + capacity);
        }
        IdleStrategy backoff = null;
        while (true) {
            if (closed) {
                return CLOSED;
            }
            long r = reserved;
            if (r + size - front <= mask + 1) {
                if (r + size > commitLimit) {
                    commitFor(r + size); // rare: see commitLimit
                    continue;
                }
                if (RESERVED.compareAndSet(this, r, r + size)) {
                    return r;
                }
                continue;
            }
            if (tryGrow(r, size)) {
                continue;
            }
            if (backoff == null) {
                backoff = IdleStrategy.waiter();
            }
            if (backoff.parking()) {
                if (Thread.interrupted()) {
                    throw new InterruptedException();
                }
                if (System.nanoTime() - deadlineNanos > 0) {
                    throw new java.util.concurrent.TimeoutException("send ring full: nothing confirmed in time");
                }
            }
            backoff.idle(waiters, () -> closed || reserved + size - front <= mask + 1 || grownMask(reserved, size, mask) != mask);
        }
    }

    /**
     * {@link #reserve} without waiting: the start position, {@link #CLOSED},
     * or {@link #FULL} when the ring has no room for the record right now.
     */
    public long tryReserve(int length) {
        int size = aligned(length);
        if (length < ALIGN || size > capacity) {
            throw new IllegalArgumentException("cannot reserve " + length + " bytes in a ring of " + capacity);
        }
        long waitingSince = 0;
        for (int spins = 0; ; ) {
            if (closed) {
                return CLOSED;
            }
            long r = reserved;
            if (r + size - front > mask + 1) {
                if (tryGrow(r, size)) {
                    continue;
                }
                if ((r & RELEASING) != 0) {
                    // A move on or a release, not a full ring; its thread may
                    // have lost its CPU in between: yield to it after a while.
                    if (spins++ < MOVE_SPINS) {
                        Thread.onSpinWait();
                        continue;
                    }
                    long now = System.nanoTime();
                    if (waitingSince == 0) {
                        waitingSince = now | 1;
                    }
                    if (now - waitingSince < MOVE_WAIT_NANOS) {
                        Thread.yield();
                        continue;
                    }
                }
                return FULL;
            }
            if (r + size > commitLimit) {
                try {
                    commitFor(r + size);
                } catch (RingMemory.CommitFailed e) {
                    return FULL; // the waiting path says why
                }
                continue;
            }
            if (RESERVED.compareAndSet(this, r, r + size)) {
                return r;
            }
        }
    }

    /**
     * Grows the window for a producer held up at {@code reserved == r}
     * (the rule at {@link #START_WINDOW}; to fit a larger record at once,
     * else doubled), if every position in use, {@code [front, r)}, maps to
     * the same index under the new mask as under the old: they lie in one
     * window-sized block whose position bits between the two sizes are
     * zero (or none is in use). A producer waiting for room sees this come
     * true as the send thread frees space. Excludes other producers, a move
     * on and a release with the flag (see {@link #RELEASING}); the front
     * only moves forward meanwhile, so the condition holds, and the mask is
     * looked at again under the flag: another producer may have grown it
     * since (the flag's CAS cannot tell: {@code reserved} is back at
     * {@code r}). True if the window changed, or may have: look again.
     */
    private boolean tryGrow(long r, int size) {
        long m = mask;
        long to = grownMask(r, size, m);
        if (to == m || !RESERVED.compareAndSet(this, r, r | RELEASING)) {
            return false;
        }
        if (mask == m) {
            mask = to; // plain: published by the volatile store below
        }
        reserved = r;
        waiters.signal();
        return true;
    }

    /**
     * Grows the window to hold {@code bytes} (up to the capacity) while the
     * ring is empty: for a writer that fills it before anything can be
     * posted (a resend onto a connection not yet installed), which the
     * growth rule would not see. False if the ring holds records (or is
     * being moved on or closed) and its window is smaller.
     */
    public boolean ensureWindow(int bytes) {
        long r = reserved;
        long m = mask;
        if (bytes <= m + 1 || m + 1 >= capacity) {
            return true;
        }
        if (r != front || (r & RELEASING) != 0 || closed || !RESERVED.compareAndSet(this, r, r | RELEASING)) {
            return false;
        }
        mask = Math.max(mask, Math.min(capacity, Long.highestOneBit(bytes - 1L) << 1) - 1); // empty: all zero
        reserved = r;
        waiters.signal();
        return true;
    }

    /** The mask {@link #tryGrow} would set for a producer of {@code size} bytes held up at {@code r}; {@code m} if none. */
    private long grownMask(long r, int size, long m) {
        if (m + 1 >= capacity || (r & RELEASING) != 0 || closed) {
            return m;
        }
        long f = front;
        if (size <= m + 1 && (long) FRONT_POSTED.getOpaque(this) - f < (m + 1) / 2) {
            return m; // the send thread is behind: a larger window would only queue more
        }
        long to = size > m + 1 ? Math.min(capacity, Long.highestOneBit(size - 1) << 1) - 1 : 2 * m + 1;
        boolean alike = r == f || ((f & ~m) == ((r - 1) & ~m) && (f & to & ~m) == 0);
        return alike ? to : m;
    }

    /**
     * Commits the ring's memory ({@link RingMemory#commit}) up to position
     * {@code end} and beyond: as much as was committed since the last
     * release, between {@link #MIN_COMMIT} and {@link #MAX_COMMIT}, so a
     * streaming ring commits in a few doubling steps, then not again until a
     * release. Called by a producer whose reservation would end beyond
     * {@code commitLimit}, before its CAS.
     *
     * <p>Under {@code commitLock}, so commits, a release and the close never
     * overlap; each commits only bytes not committed since the last release,
     * from {@code commitLimit} up to one capacity past {@code commitBase}
     * (then {@code commitLimit} becomes {@link Long#MAX_VALUE}). No producer
     * touches a byte before it is committed: it reserves only below
     * {@code commitLimit}, and a release (which lowers it) moves every
     * position on ({@link OutgoingRingBuffer#releaseIfIdle}), so a CAS against a
     * {@code reserved} read before the release fails.
     */
    private void commitFor(long end) {
        synchronized (commitLock) {
            long c = commitLimit;
            if (end <= c || closed) {
                return;
            }
            long grow = Math.max(end - c, Math.min(Math.max(c - commitBase, MIN_COMMIT), MAX_COMMIT));
            long to = c + ((grow + COMMIT_PAGE - 1) & -COMMIT_PAGE);
            boolean all = to - commitBase >= capacity;
            if (all) {
                to = commitBase + capacity;
            }
            memory.commit(c & (capacity - 1), to - c); // a ring that commits ahead has no smaller window
            commitLimit = all ? Long.MAX_VALUE : to;
        }
    }

    /** Copies {@code length} bytes of {@code src} from {@code offset} to ring position {@code position}. */
    public void write(long position, byte[] src, int offset, int length) {
        long m = mask; // a record maps alike under both masks of a change (tryGrow)
        long index = position & m;
        int first = (int) Math.min(length, m + 1 - index);
        // Safe: the caller's reservation, inside the ring, committed; no release before it is confirmed (class comment).
        Memory.copy(src, offset, address + index, first);
        if (first < length) {
            Memory.copy(src, offset + first, address, length - first);
        }
    }

    /**
     * Publishes the record at {@code start}: stores its first word, the
     * record length {@code length} (big-endian), after everything else the
     * writer wrote. The record's bytes 0..3 must not have been written.
     */
    public void publish(long start, int length) {
        Memory.putIntVolatile(address + (start & mask), bigEndian(length)); // safe: the record's own first word
    }

    /**
     * Fails current and future reservations (the connection is gone). A
     * file ring's file is closed (no commit or release can follow); the
     * memory stays mapped for writers that reserved before.
     */
    public void close() {
        closed = true;
        waiters.signal();
        if (memory != null) {
            synchronized (commitLock) {
                memory.close();
            }
        }
    }

    public boolean isClosed() {
        return closed;
    }
}
