package io.ibdxnet;

/**
 * A message that expects a response of class {@code R}: declare it as
 * {@code class Get extends Request<GetResult>} and
 * {@link DXNet#sendSync(Request, int)} returns a {@code GetResult}, no cast.
 * A response of another class completes the request exceptionally
 * ({@link NetworkException} naming both classes) instead of failing with a
 * {@code ClassCastException} in the caller.
 */
public abstract class Request<R extends Response> extends Message {
    int requestId;

    /**
     * For deserialisation (registered types need a no-argument constructor).
     *
     * @param type the type byte
     * @param subtype the subtype byte
     */
    protected Request(byte type, byte subtype) {
        super(type, subtype);
    }

    /**
     * A request for {@code destination}.
     *
     * @param destination the node it goes to
     * @param type the type byte
     * @param subtype the subtype byte
     */
    protected Request(int destination, byte type, byte subtype) {
        super(destination, type, subtype);
    }

    /**
     * For deserialisation (registered types need a no-argument constructor).
     *
     * @param type the message type
     */
    protected Request(MessageType type) {
        super(type);
    }

    /**
     * A request of {@code type} for {@code destination}.
     *
     * @param destination the node it goes to
     * @param type the message type
     */
    protected Request(int destination, MessageType type) {
        super(destination, type);
    }

    /**
     * The id the response carries (set when sent and on receive).
     *
     * @return the id
     */
    public final int getRequestId() {
        return requestId;
    }
}
