package io.ibdxnet;

/**
 * A message: type and subtype select the class on the receiver (see
 * {@link DXNet#registerMessageType}); the payload is written and read by the
 * subclass. Subclasses need a public no-argument constructor.
 */
public abstract class Message {
    private final byte type;
    private final byte subtype;
    int source = -1;
    int destination = -1;

    protected Message(byte type, byte subtype) {
        this.type = type;
        this.subtype = subtype;
    }

    /** A message for {@code destination}. */
    protected Message(int destination, byte type, byte subtype) {
        this(type, subtype);
        this.destination = destination;
    }

    public final byte getType() {
        return type;
    }

    public final byte getSubtype() {
        return subtype;
    }

    /** The sending node (set on receive and on send). */
    public final int getSource() {
        return source;
    }

    public final int getDestination() {
        return destination;
    }

    public final void setDestination(int destination) {
        this.destination = destination;
    }

    /** Writes the payload. */
    protected abstract void exportPayload(MessageExporter out);

    /** Reads the payload written by {@link #exportPayload}. */
    protected abstract void importPayload(MessageImporter in);
}
