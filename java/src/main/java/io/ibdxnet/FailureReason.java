package io.ibdxnet;

/**
 * Why a send or request failed: the reason a {@link NetworkException}
 * carries, for code to branch on (the message is for people).
 */
public enum FailureReason {
    /** The destination could not be reached: not in the node table, nobody listening, no route, or connection setup failed. */
    UNREACHABLE,
    /** The destination refused this node: its handshake or key check failed, or it refused the connection on purpose. */
    REFUSED,
    /** The call's deadline passed: while connecting, waiting for ring or flow-control room, or for the answer. */
    TIMEOUT,
    /** The connection to the destination failed or closed while the send or request was under way. */
    DISCONNECTED,
    /** This node was closed (before or during the call). */
    CLOSED,
    /** The destination has no receiver for the request's type ({@link NoReceiverException}). */
    NO_RECEIVER,
    /** The destination's handler threw instead of answering ({@link RemoteHandlerException}). */
    REMOTE_HANDLER,
    /** The message is larger than {@code maxMessageSize}. */
    TOO_LARGE,
    /** The answer is not of the class the request declares, or of a type this node does not know. */
    BAD_RESPONSE,
    /** The calling thread was interrupted while it waited. */
    INTERRUPTED,
    /** The transport could not start or allocate what it needs (a port in use, no selector, no memory for a ring). */
    RESOURCES,
    /**
     * Too much already waits to be sent to the destination: an async request that cannot go out
     * at once would exceed {@code maxDeferredBytesPerNode} behind the others.
     */
    OVERLOADED
}
