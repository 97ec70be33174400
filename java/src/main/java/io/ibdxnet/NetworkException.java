package io.ibdxnet;

/** Sending failed: no connection, the peer disconnected, or the send ring stayed full. */
public class NetworkException extends Exception {
    private static final long serialVersionUID = 1L;

    /**
     * A failure described by {@code message}.
     *
     * @param message what failed
     */
    public NetworkException(String message) {
        super(message);
    }

    /**
     * A failure described by {@code message}, caused by {@code cause}.
     *
     * @param message what failed
     * @param cause why
     */
    public NetworkException(String message, Throwable cause) {
        super(message, cause);
    }
}
