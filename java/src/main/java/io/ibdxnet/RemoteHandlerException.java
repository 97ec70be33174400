package io.ibdxnet;

/**
 * The receiver of a request threw instead of answering: the remote
 * exception's class and message, delivered to the requester as the
 * request's failure (the remote stack trace stays in the remote log).
 */
public class RemoteHandlerException extends NetworkException {
    private static final long serialVersionUID = 1L;
    private final int node;
    private final String remoteClass;

    public RemoteHandlerException(int node, String remoteClass, String remoteMessage) {
        this("the handler on node " + node + " failed: " + remoteClass + (remoteMessage == null ? "" : ": " + remoteMessage),
                node, remoteClass);
    }

    /** For subclasses that say what happened themselves. */
    protected RemoteHandlerException(String message, int node, String remoteClass) {
        this(FailureReason.REMOTE_HANDLER, message, node, remoteClass);
    }

    /** For subclasses with a reason of their own. */
    RemoteHandlerException(FailureReason reason, String message, int node, String remoteClass) {
        super(reason, message);
        this.node = node;
        this.remoteClass = remoteClass;
    }

    /** The node whose handler failed. */
    public int node() {
        return node;
    }

    /** The class name of the exception the remote handler threw. */
    public String remoteClass() {
        return remoteClass;
    }
}
