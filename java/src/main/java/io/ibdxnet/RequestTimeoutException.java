package io.ibdxnet;

/** No response arrived within the timeout ({@link FailureReason#TIMEOUT}). */
public class RequestTimeoutException extends NetworkException {
    private static final long serialVersionUID = 1L;

    /**
     * A request that timed out.
     *
     * @param message what timed out, for people
     */
    public RequestTimeoutException(String message) {
        super(FailureReason.TIMEOUT, message);
    }
}
