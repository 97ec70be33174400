package io.ibdxnet.core;

import java.util.ArrayDeque;

/**
 * What the stream assemblers of one node may hold: the largest message a
 * peer may announce, and the bytes that unfinished messages (announced by a
 * first frame, not yet complete) may claim per connection and for the whole
 * node. Used by whoever turns buffers into messages (one thread at a time);
 * {@link #version()} and {@link #claimed()} may be read by any thread.
 *
 * <h2>Blame and backpressure</h2>
 * Only what one connection does by itself is a violation (the assembler
 * checks it): a message above {@code maxMessageSize}, or its own unfinished
 * claims above {@code perConnection}. The node budget never closes a
 * connection: a claim it cannot grant now {@link Grant#WAIT}s — the assembler
 * stops at that frame (after its header, which it keeps), the bytes from
 * there on are not confirmed, and flow control holds that sender back, no
 * other. The caller retries once {@link #version()} changed.
 *
 * <h2>Reservations: why nobody waits mid-message</h2>
 * A connection's frames arrive in one order, and frames of messages sent by
 * several threads interleave: the frames that would complete a message may
 * stand behind the first frame of the next one. A connection that holds
 * claims and then had to wait could therefore never give them back, and
 * connections waiting for each other's budget would wait forever. So the
 * node budget is handed out as <em>reservations</em> per connection, not per
 * claim: a connection whose unfinished messages would not fit its reservation
 * waits for a bigger one <em>before</em> it holds anything that needs it, and
 * once it holds a {@link Tier#FULL} reservation ({@code perConnection} bytes)
 * every claim it may make without a violation fits in it — it never waits
 * again until its last unfinished message completed and the reservation went
 * back. Who waits therefore holds either nothing or a {@link Tier#SHARE};
 * who holds a full reservation never waits. A waiting connection waits only
 * for full reservations (or shares) to come back, and their holders are never
 * waiting: the wait-for relation has no cycle, so there is no deadlock. A
 * full reservation comes back when its connection's messages are complete
 * (an honest sender completes them; one that never does holds at most
 * {@code perConnection}, as before).
 *
 * <h2>Fairness and the guaranteed share</h2>
 * Waiting connections are served first come, first served (one queue per
 * pool): a later connection is not granted before an earlier one, whatever
 * the sizes. Besides the full reservations (a pool of
 * {@code perNode - sharePool} bytes, at least {@code perConnection}), a
 * separate pool of {@link #sharePool} = min(perNode − perConnection,
 * perNode / 8) bytes gives each connection without a reservation a
 * {@link Tier#SHARE} of {@link #share} = min(sharePool / 16,
 * maxMessageSize + {@link #OVERHEAD}) bytes: unfinished messages that fit in
 * it never wait for the full reservations, however many of them are held
 * (by slow or hostile peers); 16 connections hold a share at once, others
 * queue for one. The two pools together are {@code perNode}: all claims of
 * the node stay within {@code perNode} (what the assemblers allocate for
 * unfinished messages; single-frame messages are not claimed, one at most
 * per connection at a time). Defaults: 1 GiB per node, 256 MiB per
 * connection: 3 full reservations of 256 MiB, and shares of 8 MiB from a
 * 128 MiB pool. With {@code perNode == perConnection} there is no share pool.
 * A {@code perConnection} below {@code maxMessageSize + OVERHEAD} is raised to
 * it, so that an honest message of {@code maxMessageSize} bytes is never a
 * violation (its claim counts the overhead too).
 */
public final class ReceiveLimits {
    /** Accounted per unfinished message on top of its bytes (object and map entry). */
    static final long OVERHEAD = 64;
    /** Connections that may hold a share at once. */
    static final int SHARES = 16;

    /** What {@link #claim} answers. */
    public enum Grant { GRANTED, WAIT }

    /** How much of the node budget a connection holds. */
    enum Tier { NONE, SHARE, FULL }

    /** One connection's standing with the limits (its assembler's). */
    static final class Account {
        long claimed;
        Tier tier = Tier.NONE;
        /** In {@link #waitingFull} or {@link #waitingShare}. */
        boolean queued;
    }

    final int maxMessageSize;
    final long perConnection;
    final long perNode;
    /** Bytes of the pool the shares come from. */
    final long sharePool;
    /** One connection's guaranteed share; 0 if there is no share pool. */
    final long share;
    private final long fullPool;
    private long fullHeld;
    private long shareHeld;
    private final ArrayDeque<Account> waitingFull = new ArrayDeque<>();
    private final ArrayDeque<Account> waitingShare = new ArrayDeque<>();
    /** Written by the role holder only; volatile for the gauge. */
    private volatile long claimed;
    /** Changes whenever budget came back or a waiting connection left: the time to retry. */
    private volatile long version;

    public ReceiveLimits(int maxMessageSize, long perConnection, long perNode) {
        if (perConnection < maxMessageSize + OVERHEAD || perNode < perConnection) {
            // DXNetConfig asks perConnection >= maxMessageSize; a claim also counts OVERHEAD.
            perConnection = Math.max(perConnection, maxMessageSize + OVERHEAD);
            perNode = Math.max(perNode, perConnection);
        }
        this.maxMessageSize = maxMessageSize;
        this.perConnection = perConnection;
        this.perNode = perNode;
        this.sharePool = Math.min(perNode - perConnection, perNode / 8);
        this.share = Math.min(sharePool / SHARES, maxMessageSize + OVERHEAD);
        this.fullPool = perNode - sharePool;
    }

    /** Bytes claimed by unfinished messages of every connection. */
    public long claimed() {
        return claimed;
    }

    /** Bytes of the node budget held as reservations and shares (at least {@link #claimed}). */
    public long reserved() {
        return fullHeld + shareHeld;
    }

    /** Connections waiting for budget. */
    public int waiting() {
        return waitingFull.size() + waitingShare.size();
    }

    /**
     * Changes whenever budget came back (or a waiting connection gave up):
     * a caller holding bytes of a waiting stream feeds them again then.
     */
    public long version() {
        return version;
    }

    /**
     * {@code bytes} more for unfinished messages of {@code a}, which stays
     * within {@link #perConnection} (the caller checked). Granted, or
     * {@code a} waits in its queue and must ask again (the same claim) later.
     */
    Grant claim(Account a, long bytes) {
        long after = a.claimed + bytes;
        boolean fits = a.tier == Tier.FULL || (a.tier == Tier.SHARE && after <= share);
        if (!fits) {
            boolean small = a.tier == Tier.NONE && after <= share;
            if (!(small ? takeShare(a) : takeFull(a))) {
                return Grant.WAIT;
            }
        }
        a.claimed = after;
        claimed += bytes;
        return Grant.GRANTED;
    }

    private boolean takeShare(Account a) {
        if ((!waitingShare.isEmpty() && waitingShare.peekFirst() != a) || shareHeld + share > sharePool) {
            enqueue(waitingShare, a);
            return false;
        }
        dequeue(waitingShare, a);
        shareHeld += share;
        a.tier = Tier.SHARE;
        return true;
    }

    private boolean takeFull(Account a) {
        if ((!waitingFull.isEmpty() && waitingFull.peekFirst() != a) || fullHeld + perConnection > fullPool) {
            enqueue(waitingFull, a);
            return false;
        }
        dequeue(waitingFull, a);
        if (a.tier == Tier.SHARE) { // the full reservation covers it
            shareHeld -= share;
            version++;
        }
        fullHeld += perConnection;
        a.tier = Tier.FULL;
        return true;
    }

    private static void enqueue(ArrayDeque<Account> q, Account a) {
        if (!a.queued) {
            q.addLast(a);
            a.queued = true;
        }
    }

    private void dequeue(ArrayDeque<Account> q, Account a) {
        if (a.queued) {
            q.remove(a);
            a.queued = false;
            version++; // the next in line may go now
        }
    }

    /** A complete message of {@code a} gives its claim back; its reservation too if it was its last. */
    void release(Account a, long bytes) {
        a.claimed -= bytes;
        claimed -= bytes;
        if (a.claimed == 0) {
            giveBack(a);
        }
    }

    /** {@code a}'s connection ended: every claim, its reservation and its place in line go back. */
    void forget(Account a) {
        claimed -= a.claimed;
        a.claimed = 0;
        giveBack(a);
        if (a.queued) {
            waitingFull.remove(a);
            waitingShare.remove(a);
            a.queued = false;
            version++;
        }
    }

    private void giveBack(Account a) {
        if (a.tier == Tier.FULL) {
            fullHeld -= perConnection;
        } else if (a.tier == Tier.SHARE) {
            shareHeld -= share;
        } else {
            return;
        }
        a.tier = Tier.NONE;
        version++;
    }
}
