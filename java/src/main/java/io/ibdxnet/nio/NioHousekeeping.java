package io.ibdxnet.nio;

import io.ibdxnet.transport.OutgoingRingBuffer;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * What the selector thread checks every housekeeping period (and before
 * each new connection): handshakes past their deadline, connections silent
 * beyond the idle timeout, keep-alives on quiet ones, the pages of rings
 * empty for a second given back, and the eviction of
 * the least recently used outgoing connection when there are too many.
 */
final class NioHousekeeping {
    /** What housekeeping asks of the selector thread's I/O (the reactor, which owns this). */
    interface ChannelIo {
        /** Writes what {@code c} has. */
        void flush(NioChannel c, long now);

        /** Reads what {@code c} has. */
        void read(NioChannel c, long now) throws IOException;
    }

    private final ChannelIo reactor;
    private final NioConnections conns;
    private final NioSettings settings;
    private final NioHandshake handshake;

    NioHousekeeping(ChannelIo reactor, NioConnections conns, NioSettings settings, NioHandshake handshake) {
        this.reactor = reactor;
        this.conns = conns;
        this.settings = settings;
        this.handshake = handshake;
    }

    void run(long now) {
        long keepAlive = TimeUnit.MILLISECONDS.toNanos(settings.keepAliveMs);
        long idle = TimeUnit.MILLISECONDS.toNanos(settings.idleTimeoutMs);
        List<NioChannel> channels = conns.channels;
        for (int i = channels.size() - 1; i >= 0; i--) {
            NioChannel c = channels.get(i);
            switch (c.state()) {
                case CLOSED:
                    channels.remove(i);
                    break;
                case CONNECTING:
                case HANDSHAKE:
                    if (now - c.deadline > 0 && !c.outgoing && c.state() == NioChannel.State.HANDSHAKE) {
                        handshake.timedOut(c, settings.handshakeDeadlineMs());
                        conns.close(c, NioFailure.HANDSHAKE_TIMEOUT.exception("no handshake in time"));
                    } else if (now - c.deadline > 0) {
                        conns.fail(c, NioFailure.HANDSHAKE_TIMEOUT.exception("no handshake within "
                                + settings.connectTimeoutMs + " ms"));
                    }
                    break;
                case CLOSING:
                    if (now - c.lastRead > idle && !readBeforeJudging(c, now)) {
                        conns.fail(c, NioFailure.IDLE_TIMEOUT.exception("no goodbye from node " + c.peer() + " within "
                                + settings.idleTimeoutMs + " ms"));
                    } else {
                        reactor.flush(c, now);
                    }
                    break;
                default:
                    // A stalled reader has unread bytes waiting: that is not silence.
                    if (now - c.lastRead > idle && !c.isStalled() && !readBeforeJudging(c, now)) {
                        conns.fail(c, NioFailure.IDLE_TIMEOUT.exception("nothing received from node " + c.peer() + " for "
                                + settings.idleTimeoutMs + " ms"));
                    } else if (now - c.lastWrite > keepAlive && c.betweenRecords() && c.control.remaining() >= 4) {
                        c.control.putInt(NioWire.KEEP_ALIVE);
                        reactor.flush(c, now);
                    }
                    if (c.outgoing && c.orb != null) {
                        c.releaseRingIfIdle(now, OutgoingRingBuffer.RELEASE_AFTER_NANOS); // an idle ring's pages
                    }
            }
        }
    }

    /**
     * Reads what the socket holds before a connection is judged silent: after
     * a pause of this process (SIGSTOP, a long GC) housekeeping runs before
     * the selector reports the data that arrived meanwhile. True if something
     * was read (or the read itself ended the connection).
     */
    private boolean readBeforeJudging(NioChannel c, long now) {
        long before = c.lastRead;
        try {
            reactor.read(c, now);
        } catch (IOException e) {
            conns.fail(c, NioFailure.of(e));
            return true;
        }
        return c.lastRead != before || c.state() == NioChannel.State.CLOSED || c.isStalled();
    }

    /** Evicts the least recently used idle outgoing channel if a new one to {@code newNode} would exceed the limit. */
    void evictFor(int newNode) {
        int open = 0;
        NioChannel lru = null;
        for (NioChannel c : conns.channels) {
            if (!c.outgoing || c.state() == NioChannel.State.CLOSED || c.orderly) {
                continue;
            }
            open++;
            if (c.peer() != newNode && c.state() == NioChannel.State.OPEN && c.orb.isDrained() && c.writers.get() == 0
                    && (lru == null || c.lastUse - lru.lastUse < 0)) {
                lru = c;
            }
        }
        if (open >= settings.maxConnections && lru != null) {
            conns.evict(lru);
        }
    }
}
