package io.ibdxnet.internal;

/**
 * An async send that could not go out without waiting: the message
 * serialised into its own array, the frames of it already sent, and the
 * request it belongs to. Sent later, in order, by {@link DeferredSends}.
 */
public final class DeferredMessage {
    public final int dest;
    final byte type;
    final byte subtype;
    final int kindFlags;
    final int requestId;
    final int messageId;
    final byte[] payload;
    /** Payload bytes already sent inline (frames of a larger message), 0 if none. */
    public final int sentInline;
    /** When the send must have gone out ({@link System#nanoTime}). */
    public long sendBy;
    /** The request whose future learns of a failure (set by the caller). */
    public PendingRequests.Pending request;
    /** Sent by a handler on a transport's receiving thread ({@link DeferredSends#receivingThreadSendsWaiting}). */
    public boolean fromReceivingThread;
    /** A {@link DropNotice}: nobody waits for it, a failure is only logged. */
    public boolean dropNotice;

    /** An answer to a request (a reply, or the error reply of a failed handler). */
    public boolean isResponse() {
        return (kindFlags & io.ibdxnet.core.Frame.RESPONSE) != 0;
    }

    DeferredMessage(int dest, byte type, byte subtype, int kindFlags, int requestId, int messageId, byte[] payload,
            int sentInline) {
        this.dest = dest;
        this.type = type;
        this.subtype = subtype;
        this.kindFlags = kindFlags;
        this.requestId = requestId;
        this.messageId = messageId;
        this.payload = payload;
        this.sentInline = sentInline;
    }
}
