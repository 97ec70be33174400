package io.ibdxnet.nio;

import io.ibdxnet.transport.TransportListener;
import java.io.IOException;
import java.util.List;

/**
 * The selector thread's reads and writes on a channel: the handshake while
 * it lasts, then records or control words ({@link NioRecordReader}); writes
 * of what senders published; and how each ends a channel
 * ({@link NioConnections}).
 */
final class NioChannelIo implements NioHousekeeping.ChannelIo {
    private final NioCounters counters;
    private final NioConnections conns;
    private final NioHandshake handshake;
    private final TransportListener listener;
    private final NioRecordReader reader;

    NioChannelIo(NioCounters counters, NioConnections conns, NioHandshake handshake, TransportListener listener,
            NioRecordReader reader) {
        this.counters = counters;
        this.conns = conns;
        this.handshake = handshake;
        this.listener = listener;
        this.reader = reader;
    }

    /** Writes what {@code c} has; a closing channel that wrote everything says goodbye. */
    @Override
    public void flush(NioChannel c, long now) {
        try {
            counters.bytesSent.addAndGet(c.flush(now));
            if (c.state() == NioChannel.State.CLOSED || !c.keyValid()) {
                return;
            }
            boolean done = c.fullyWritten();
            c.wantWrite(!done);
            if (done && c.state() == NioChannel.State.CLOSING && c.writers.get() == 0 && c.sayGoodbye()) {
                c.flush(now); // the peer closes when it read the goodbye (then we do)
            }
        } catch (IOException e) {
            conns.fail(c, NioFailure.of(e));
        }
    }

    /** Reads what {@code c} has: the handshake while it lasts, then records or control words. */
    @Override
    public void read(NioChannel c, long now) throws IOException {
        while (c.state() == NioChannel.State.HANDSHAKE) {
            if (!readFully(c, now)) {
                return;
            }
            switch (c.outgoing ? handshake.onConnectorRead(c, now) : handshake.onAcceptorRead(c)) {
                case CONTINUE:
                    flush(c, now);
                    break;
                case OPEN:
                    c.open();
                    flush(c, now); // frames written while connecting go out
                    listener.onConnected(c.peer());
                    break;
                case ACCEPT:
                    conns.accept(c);
                    flush(c, now);
                    break;
                case REFUSED:
                    flushRefusal(c, now);
                    return;
                default:
                    conns.close(c);
                    return;
            }
        }
        ended(c, c.outgoing ? reader.readControl(c, now) : reader.readData(c, now));
    }

    /** Acts on how a read left {@code c}. */
    private void ended(NioChannel c, NioRecordReader.End end) {
        if (end == NioRecordReader.End.GOODBYE) {
            conns.goodbye(c);
        } else if (end == NioRecordReader.End.CLOSED) {
            conns.close(c);
        }
    }

    /** Reads into {@code small} up to its limit; true when full. */
    private boolean readFully(NioChannel c, long now) throws IOException {
        int n = c.socket.read(c.small);
        if (n < 0) {
            throw NioFailure.PEER_CLOSED.exception(c.outgoing ? "the peer closed the connection during the handshake"
                    : "end of stream");
        }
        c.lastRead = now;
        return !c.small.hasRemaining();
    }

    /** Sends a refusal as far as the socket takes it and closes (the refusal is counted already). */
    private void flushRefusal(NioChannel c, long now) {
        try {
            c.flush(now);
        } catch (IOException e) {
            // the peer is gone already
        }
        conns.close(c);
    }

    /** Resumes reading on stalled channels once buffers are free again. True if some stay stalled. */
    boolean retryStalled(long now) {
        boolean any = false;
        List<NioChannel> channels = conns.channels;
        for (int i = 0; i < channels.size(); i++) {
            NioChannel c = channels.get(i);
            if (!c.isStalled() || c.state() == NioChannel.State.CLOSED) {
                continue;
            }
            c.resume();
            try {
                ended(c, reader.readData(c, now));
            } catch (IOException e) {
                conns.fail(c, NioFailure.of(e));
            }
            any |= c.isStalled();
        }
        return any;
    }
}
