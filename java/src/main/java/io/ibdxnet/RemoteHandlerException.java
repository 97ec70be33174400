package io.ibdxnet;

/**
 * The receiver of a request threw instead of answering: the remote
 * exception's class and message, delivered to the requester as the
 * request's failure (the remote stack trace stays in the remote log).
 */
public class RemoteHandlerException extends NetworkException {
    private static final long serialVersionUID = 1L;
    /** The node whose handler failed. */
    private final int node;
    /** The class name of what it threw. */
    private final String remoteClass;

    /**
     * The handler on {@code node} threw.
     *
     * @param node the node whose handler failed
     * @param remoteClass the class name of what it threw
     * @param remoteMessage its message, or null
     */
    public RemoteHandlerException(int node, String remoteClass, String remoteMessage) {
        this("the handler on node " + node + " failed: " + remoteClass + (remoteMessage == null ? "" : ": " + remoteMessage),
                node, remoteClass);
    }

    /**
     * For subclasses that say what happened themselves.
     *
     * @param message the whole message
     * @param node the node that answered
     * @param remoteClass the class name of what it threw (or the subclass's own)
     */
    protected RemoteHandlerException(String message, int node, String remoteClass) {
        this(FailureReason.REMOTE_HANDLER, message, node, remoteClass);
    }

    /** For subclasses with a reason of their own. */
    RemoteHandlerException(FailureReason reason, String message, int node, String remoteClass) {
        super(reason, message);
        this.node = node;
        this.remoteClass = remoteClass;
    }

    /**
     * The node whose handler failed.
     *
     * @return its id
     */
    public int node() {
        return node;
    }

    /**
     * The class name of the exception the remote handler threw.
     *
     * @return the class name
     */
    public String remoteClass() {
        return remoteClass;
    }
}
