package io.ibdxnet.nio;

import io.ibdxnet.core.RateLimitedLog;
import java.net.InetAddress;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.logging.Logger;

/**
 * Admission before resources: which accepted connection may take a
 * handshake slot, decided from its source address alone, before any buffer
 * or hello. With the address check on, an address where the node table has
 * no node (a wildcard entry names none) is refused at once, so strangers
 * hold no slot at all. Every address holds at most {@link #PER_ADDRESS}
 * pending handshakes, all together at most {@link #MAX_PENDING}: a new
 * connection over its address's cap displaces that address's pending
 * handshake that got least far (the oldest of those), so a process that
 * keeps idle sockets open from an honest node's own address cannot lock
 * that node out: an honest hello arrives with the connection and is read
 * at once. A silent handshake is read once more before it is displaced:
 * its hello may have come after its accept, while a burst of accepts ran
 * before the selector could report it. When all slots are held, a new connection displaces from the
 * address holding the most (if that evens the shares), else it is refused
 * ({@code busy}). Selector thread only.
 */
final class NioAdmission {
    /** Incoming connections in their handshake at most. */
    static final int MAX_PENDING = 128;
    /** ... from one source address. */
    static final int PER_ADDRESS = 4;
    /** Warning kinds: one line per kind per second at most, with the count suppressed. */
    private static final int LOG_UNKNOWN = 1;
    private static final int LOG_DISPLACED = 2;
    private static final int LOG_BUSY = 3;

    private final int nodeId;
    private final NioHandshake handshake;
    private final boolean checkAddress;
    private final RateLimitedLog log = new RateLimitedLog(NioLog.LOG, 1_000);
    /** Per source address: its channels still in their handshake, oldest first (ended ones leave lazily). */
    private final Map<InetAddress, ArrayDeque<NioChannel>> pending = new HashMap<>();
    /** Channels in {@link #pending}, ended ones not yet purged included. */
    private int entries;

    final AtomicLong refusedUnknown = new AtomicLong();
    final AtomicLong displaced = new AtomicLong();

    NioAdmission(int nodeId, NioHandshake handshake, boolean checkAddress) {
        this.nodeId = nodeId;
        this.handshake = handshake;
        this.checkAddress = checkAddress;
    }

    /** False, counted and logged, for a source the node table has no node at (with the address check on). */
    boolean known(InetAddress from) {
        if (!checkAddress || handshake.knownAddress(from)) {
            return true;
        }
        long n = refusedUnknown.incrementAndGet();
        log.warn(LOG_UNKNOWN, "node " + nodeId + ": connection from " + from.getHostAddress()
                + " refused at accept: no node of the table is at that address (" + n + " so far)");
        return false;
    }

    /**
     * Makes room for one more handshake from {@code from}, handing what it
     * displaces to {@code close}; false (counted {@code busy}) if none can be had.
     * {@code listen} reads a silent handshake before it is displaced; true if
     * that moved it on (its hello came, or it ended).
     */
    boolean makeRoom(InetAddress from, Consumer<NioChannel> close, Predicate<NioChannel> listen) {
        ArrayDeque<NioChannel> own = purge(from);
        if (own != null && own.size() >= PER_ADDRESS) {
            NioChannel weakest = weakestUnheard(from, listen);
            if (weakest != null) {
                displace(pending.get(from), weakest, from, close, "its address holds " + PER_ADDRESS + " pending handshakes already");
                return true;
            }
            own = purge(from);
        }
        int ownCount = own == null ? 0 : own.size();
        if (entries >= MAX_PENDING) {
            purgeAll();
        }
        if (entries < MAX_PENDING) {
            return true;
        }
        Map.Entry<InetAddress, ArrayDeque<NioChannel>> busiest = null;
        for (Map.Entry<InetAddress, ArrayDeque<NioChannel>> e : pending.entrySet()) {
            if (busiest == null || e.getValue().size() > busiest.getValue().size()) {
                busiest = e;
            }
        }
        if (busiest != null && busiest.getValue().size() > ownCount + 1) {
            displace(busiest.getValue(), weakest(busiest.getValue()), busiest.getKey(), close,
                    "all " + MAX_PENDING + " handshake slots are held");
            return true;
        }
        handshake.count("busy");
        log.warn(LOG_BUSY, "node " + nodeId + ": connection from " + from.getHostAddress()
                + " refused: all " + MAX_PENDING + " handshake slots are held");
        return false;
    }

    /**
     * The handshake from {@code at} to displace while the address is at its
     * cap, or null once it is not (one that was heard ended): one still
     * silent is heard first, and passed over if its hello came meanwhile.
     * Each channel is heard once at most (after that it is past step 0 or gone).
     */
    private NioChannel weakestUnheard(InetAddress at, Predicate<NioChannel> listen) {
        while (true) {
            ArrayDeque<NioChannel> q = purge(at);
            if (q == null || q.size() < PER_ADDRESS) {
                return null;
            }
            NioChannel weakest = weakest(q);
            if (progress(weakest) > 0 || !listen.test(weakest)) {
                return weakest;
            }
        }
    }

    /** {@code c} took a slot. */
    void admitted(NioChannel c) {
        pending.computeIfAbsent(c.remoteAddress, a -> new ArrayDeque<>()).addLast(c);
        entries++;
    }

    /** The handshake in {@code q} that got least far, the oldest of those. */
    private static NioChannel weakest(ArrayDeque<NioChannel> q) {
        NioChannel weakest = null;
        for (NioChannel c : q) {
            if (weakest == null || progress(c) < progress(weakest)) {
                weakest = c;
            }
        }
        return weakest;
    }

    /** Closes {@code weakest}, a handshake in {@code q} (from {@code at}). */
    private void displace(ArrayDeque<NioChannel> q, NioChannel weakest, InetAddress at, Consumer<NioChannel> close, String why) {
        q.remove(weakest);
        entries--;
        if (q.isEmpty()) {
            pending.remove(at);
        }
        long n = displaced.incrementAndGet();
        log.warn(LOG_DISPLACED, "node " + nodeId + ": a pending handshake from " + at.getHostAddress()
                + " was closed for a newer connection: " + why + " (" + n + " so far)");
        close.accept(weakest);
    }

    private static int progress(NioChannel c) {
        return c.handshake == null ? Integer.MAX_VALUE : c.handshake.step;
    }

    /** {@code from}'s queue without the channels that left their handshake, or null if none is left. */
    private ArrayDeque<NioChannel> purge(InetAddress from) {
        ArrayDeque<NioChannel> q = pending.get(from);
        if (q == null) {
            return null;
        }
        for (Iterator<NioChannel> it = q.iterator(); it.hasNext();) {
            if (it.next().state() != NioChannel.State.HANDSHAKE) {
                it.remove();
                entries--;
            }
        }
        if (q.isEmpty()) {
            pending.remove(from);
            return null;
        }
        return q;
    }

    private void purgeAll() {
        for (InetAddress a : pending.keySet().toArray(new InetAddress[0])) {
            purge(a);
        }
    }

    void stats(Map<String, Long> m) {
        m.put("accepts_refused_unknown_address", refusedUnknown.get());
        m.put("handshakes_displaced", displaced.get());
    }
}
