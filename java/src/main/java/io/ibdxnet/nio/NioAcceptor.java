package io.ibdxnet.nio;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.core.RateLimitedLog;
import java.io.Closeable;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;

/**
 * The NIO transport's listening socket and what the selector thread does
 * when it is ready: admission first, then an incoming channel in its
 * handshake. Selector thread only, but for {@link #localPort}.
 */
final class NioAcceptor {
    /**
     * The kernel's queue of connections waiting for accept (capped by
     * net.core.somaxconn). The admission empties it at once, so depth costs
     * little; a burst beyond it is dropped, and an honest connection's
     * dropped SYN costs it the 1 s of a retransmission.
     */
    private static final int ACCEPT_BACKLOG = 4096;
    /** Connections accepted per turn of the loop at most (the other work goes on during a flood). */
    private static final int ACCEPTS_PER_TURN = 64;

    private final NioSettings settings;
    private final Selector selector;
    private final ServerSocketChannel server;
    private final NioAdmission admission;
    private final NioHandshake handshake;
    private final NioConnections conns;
    private final NioChannelIo io;
    private final RateLimitedLog acceptLog = new RateLimitedLog(NioLog.LOG, 1_000);
    private int nextId = 1;

    /** Listens on {@code listen}, registered with {@code selector} for accepts. */
    NioAcceptor(NioSettings settings, InetSocketAddress listen, Selector selector, NioAdmission admission,
            NioHandshake handshake, NioConnections conns, NioChannelIo io) throws NetworkException {
        this.settings = settings;
        this.selector = selector;
        this.admission = admission;
        this.handshake = handshake;
        this.conns = conns;
        this.io = io;
        try {
            this.server = ServerSocketChannel.open();
            server.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            server.bind(listen, ACCEPT_BACKLOG);
            server.configureBlocking(false);
            server.register(selector, SelectionKey.OP_ACCEPT);
        } catch (IOException e) {
            throw new NetworkException(FailureReason.RESOURCES, "cannot listen on " + settings.listenHost + ":" + settings.listenPort + ": " + e.getMessage(), e);
        }
    }

    int localPort() {
        return server.socket().getLocalPort();
    }

    /**
     * Accepts what is waiting (a bounded number per turn). Admission comes
     * first ({@link NioAdmission}): a source not in the node table is reset
     * at once, before any buffer is made for it; one that gets a slot is
     * read at once (an honest hello came with the connection).
     */
    void accept() {
        for (int i = 0; i < ACCEPTS_PER_TURN; i++) {
            SocketChannel s;
            InetAddress from;
            try {
                s = server.accept();
                if (s == null) {
                    return;
                }
                from = ((InetSocketAddress) s.getRemoteAddress()).getAddress();
            } catch (IOException e) {
                // Out of descriptors, say: the socket stays ready, so this repeats every turn.
                acceptLog.warn(0, "node " + settings.nodeId + ": accept failed: " + e);
                return;
            }
            if (!admission.known(from) || !admission.makeRoom(from, this::displace, this::listen)) {
                reset(s);
                continue;
            }
            NioChannel c;
            try {
                s.configureBlocking(false);
                s.setOption(StandardSocketOptions.TCP_NODELAY, true);
                c = NioChannel.incoming(nextId++, s, from);
                c.register(selector, SelectionKey.OP_READ);
            } catch (IOException | RuntimeException e) {
                closeQuietly(s);
                continue;
            }
            long now = System.nanoTime();
            c.lastRead = now;
            c.lastWrite = now;
            c.deadline = now + TimeUnit.MILLISECONDS.toNanos(settings.handshakeDeadlineMs());
            handshake.accepted(c);
            admission.admitted(c);
            conns.channels.add(c);
            try {
                io.read(c, now);
            } catch (IOException e) {
                conns.fail(c, NioFailure.of(e));
            } catch (CancelledKeyException e) {
                conns.close(c); // closed while it was read, as in handle
            }
        }
    }

    /**
     * Reads a silent handshake before the admission displaces it (its hello
     * may have come during this burst of accepts); true if it moved on or ended.
     */
    private boolean listen(NioChannel c) {
        try {
            io.read(c, System.nanoTime());
        } catch (IOException e) {
            conns.fail(c, NioFailure.of(e));
        } catch (CancelledKeyException e) {
            conns.close(c);
        }
        return c.state() != NioChannel.State.HANDSHAKE || c.handshake == null || c.handshake.step > 0;
    }

    /** A handshake made room for a newer one from its address: closed with a reset, counted by the admission. */
    private void displace(NioChannel c) {
        try {
            c.socket.setOption(StandardSocketOptions.SO_LINGER, 0);
        } catch (IOException e) {
            // closed anyway
        }
        conns.close(c, NioFailure.HANDSHAKE.exception("displaced by a newer connection from its address"));
    }

    /** Closes a refused socket with a reset: no FIN handshake, nothing left in TIME_WAIT here. */
    private static void reset(SocketChannel s) {
        try {
            s.setOption(StandardSocketOptions.SO_LINGER, 0);
        } catch (IOException e) {
            // closed anyway
        }
        closeQuietly(s);
    }

    void close() {
        closeQuietly(server);
    }

    private static void closeQuietly(Closeable c) {
        try {
            c.close();
        } catch (IOException e) {
            // closing anyway
        }
    }
}
