package io.ibdxnet;

/** The answer to a {@link Request}: addressed to the request's source. */
public abstract class Response extends Message {
    int requestId;

    /** For deserialisation (registered types need a no-argument constructor). */
    protected Response(byte type, byte subtype) {
        super(type, subtype);
    }

    /** A response to {@code request}. */
    protected Response(Request request, byte type, byte subtype) {
        super(request.getSource(), type, subtype);
        this.requestId = request.requestId;
    }

    public final int getRequestId() {
        return requestId;
    }
}
