package io.ibdxnet;

/** No response arrived within the timeout. */
public class RequestTimeoutException extends NetworkException {
    private static final long serialVersionUID = 1L;

    public RequestTimeoutException(String message) {
        super(message);
    }
}
