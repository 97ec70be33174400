package io.ibdxnet;

/**
 * A send or request failed. Unchecked; {@link #reason()} says why, for code
 * to branch on (see {@link FailureReason}); the message says it for people.
 */
public class NetworkException extends RuntimeException {
    private static final long serialVersionUID = 2L;

    /** Why it failed. */
    private final FailureReason reason;

    /**
     * A failure for {@code reason}, described by {@code message}.
     *
     * @param reason why it failed
     * @param message what happened, for people
     */
    public NetworkException(FailureReason reason, String message) {
        super(message);
        this.reason = java.util.Objects.requireNonNull(reason, "reason");
    }

    /**
     * A failure for {@code reason}, described by {@code message}, caused by {@code cause}.
     *
     * @param reason why it failed
     * @param message what happened, for people
     * @param cause the underlying failure
     */
    public NetworkException(FailureReason reason, String message, Throwable cause) {
        super(message, cause);
        this.reason = java.util.Objects.requireNonNull(reason, "reason");
    }

    /**
     * Why the call failed.
     *
     * @return the reason, never null
     */
    public FailureReason reason() {
        return reason;
    }
}
