package io.ibdxnet;

/**
 * The answer to a {@link Request}: addressed to the request's source. Send it
 * with {@link DXNet#reply(Request, Response)}, which addresses it, or build
 * it from the request and send it with {@link DXNet#sendMessage}.
 */
public abstract class Response extends Message {
    int requestId;

    /**
     * For deserialisation, and for {@link DXNet#reply} (which addresses it).
     *
     * @param type the type byte
     * @param subtype the subtype byte
     */
    protected Response(byte type, byte subtype) {
        super(type, subtype);
    }

    /**
     * A response to {@code request}.
     *
     * @param request the request it answers
     * @param type the type byte
     * @param subtype the subtype byte
     */
    protected Response(Request<?> request, byte type, byte subtype) {
        super(request.getSource(), type, subtype);
        this.requestId = request.requestId;
    }

    /**
     * For deserialisation, and for {@link DXNet#reply} (which addresses it).
     *
     * @param type the message type
     */
    protected Response(MessageType type) {
        super(type);
    }

    /**
     * A response of {@code type} to {@code request}.
     *
     * @param request the request it answers
     * @param type the message type
     */
    protected Response(Request<?> request, MessageType type) {
        this(request, type.type(), type.subtype());
    }

    /**
     * The id of the request this answers.
     *
     * @return the id
     */
    public final int getRequestId() {
        return requestId;
    }

    /** Addresses this response to {@code request} (used by {@link DXNet#reply}). */
    final void answer(Request<?> request) {
        setDestination(request.getSource());
        requestId = request.requestId;
    }
}
