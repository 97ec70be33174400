package io.ibdxnet;

/**
 * The destination of a request has no receiver for its type (it never
 * registered the type, or registered no handler for it): answered at once
 * by the destination instead of leaving the requester to its timeout.
 */
public class NoReceiverException extends RemoteHandlerException {
    private static final long serialVersionUID = 1L;

    /**
     * Node {@code node} refused a request.
     *
     * @param node the destination
     * @param why what it said (the type is not registered, or no handler is)
     */
    public NoReceiverException(int node, String why) {
        super(FailureReason.NO_RECEIVER, "node " + node + " refused the request: " + why, node,
                NoReceiverException.class.getName());
    }
}
