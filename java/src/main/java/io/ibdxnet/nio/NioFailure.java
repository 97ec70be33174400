package io.ibdxnet.nio;

import java.io.IOException;
import java.net.ConnectException;

/**
 * Why a NIO connection ended. The transport decides by this kind (is it a
 * failure, is a loss possible, is it counted) and keeps the text only for
 * people: the exception senders see, the log line and the loss event.
 */
enum NioFailure {
    /** Nobody accepted the TCP connect (the port is closed, the host refused). */
    REFUSED,
    /** The socket failed: reset, broken pipe, unreachable. */
    RESET,
    /** The peer closed its end without a goodbye or a shutdown word. */
    PEER_CLOSED,
    /** The handshake did not complete within the connect timeout. */
    HANDSHAKE_TIMEOUT,
    /** The peer refused our hello (with a reply saying why), or failed to prove itself during the handshake. */
    HANDSHAKE,
    /** Nothing arrived for the idle timeout (nor the goodbye of an orderly close). */
    IDLE_TIMEOUT,
    /** The peer broke the record format or the control words. */
    PROTOCOL,
    /** The core found the peer's frames in violation of the protocol ({@code closeConnection}). */
    VIOLATION,
    /** The peer opened a new connection: this one is stale. */
    REPLACED,
    /** Closed on purpose here: an orderly close, a refused hello. */
    CLOSED,
    /** This transport shuts down. */
    SHUTDOWN;

    /** An exception of this kind with {@code message} (what people read). */
    NioException exception(String message) {
        return new NioException(this, message);
    }

    /** The kind of a socket's own exception, and its message. */
    static NioException of(Exception e) {
        if (e instanceof NioException) {
            return (NioException) e;
        }
        String message = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        return new NioException(e instanceof ConnectException ? REFUSED : RESET, message, e);
    }

    /** A connection failure: its kind travels with it, so nobody parses the message. */
    static final class NioException extends IOException {
        private static final long serialVersionUID = 1L;
        final NioFailure kind;

        NioException(NioFailure kind, String message) {
            super(message);
            this.kind = kind;
        }

        NioException(NioFailure kind, String message, Throwable cause) {
            super(message, cause);
            this.kind = kind;
        }

        NioFailure kind() {
            return kind;
        }
    }
}
