package io.ibdxnet;

/** No response arrived within the timeout. */
public class RequestTimeoutException extends NetworkException {
    private static final long serialVersionUID = 1L;

    /**
     * A timeout described by {@code message}.
     *
     * @param message which request, how long
     */
    public RequestTimeoutException(String message) {
        super(message);
    }
}
