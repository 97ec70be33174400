package io.ibdxnet.ib;

/**
 * The peer refused this node's connection: the connection managers disagree
 * about the pre-shared key (one has none, or they differ). Thrown by the
 * native {@code connect}; callers see {@code FailureReason.REFUSED}.
 */
public class IbRefusedException extends IbException {
    private static final long serialVersionUID = 1L;

    public IbRefusedException(String message) {
        super(message);
    }
}
