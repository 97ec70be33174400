package io.ibdxnet;

/** A message that expects a {@link Response}; see {@link DXNet#sendSync}. */
public abstract class Request extends Message {
    int requestId;

    protected Request(byte type, byte subtype) {
        super(type, subtype);
    }

    protected Request(int destination, byte type, byte subtype) {
        super(destination, type, subtype);
    }

    public final int getRequestId() {
        return requestId;
    }
}
