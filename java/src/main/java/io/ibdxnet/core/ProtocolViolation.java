package io.ibdxnet.core;

/**
 * A peer broke the frame format or a limit: the connection that delivered
 * the bytes is closed; nothing else is affected.
 */
public final class ProtocolViolation extends Exception {
    private static final long serialVersionUID = 1L;

    public ProtocolViolation(String message) {
        super(message);
    }
}
