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

    /**
     * A message of {@code type/subtype} (the no-argument constructor of a registered class calls this).
     *
     * @param type the type byte
     * @param subtype the subtype byte
     */
    protected Message(byte type, byte subtype) {
        this.type = type;
        this.subtype = subtype;
    }

    /**
     * A message for {@code destination}.
     *
     * @param destination the node it goes to
     * @param type the type byte
     * @param subtype the subtype byte
     */
    protected Message(int destination, byte type, byte subtype) {
        this(type, subtype);
        this.destination = destination;
    }

    /**
     * A message of {@code type} (the no-argument constructor of a registered class calls this).
     *
     * @param type the message type
     */
    protected Message(MessageType type) {
        this(type.type(), type.subtype());
    }

    /**
     * A message of {@code type} for {@code destination}.
     *
     * @param destination the node it goes to
     * @param type the message type
     */
    protected Message(int destination, MessageType type) {
        this(destination, type.type(), type.subtype());
    }

    /**
     * The type byte.
     *
     * @return the type byte
     */
    public final byte getType() {
        return type;
    }

    /**
     * The subtype byte.
     *
     * @return the subtype byte
     */
    public final byte getSubtype() {
        return subtype;
    }

    /**
     * Type and subtype as a {@link MessageType}.
     *
     * @return the message type
     */
    public final MessageType getMessageType() {
        return MessageType.of(type & 0xFF, subtype & 0xFF);
    }

    /**
     * The sending node (set on receive and on send).
     *
     * @return the node id, or -1 before
     */
    public final int getSource() {
        return source;
    }

    /**
     * The node the message goes to (on receive: this node).
     *
     * @return the node id, or -1 when not addressed
     */
    public final int getDestination() {
        return destination;
    }

    /**
     * Addresses the message to {@code destination}.
     *
     * @param destination the node id
     */
    public final void setDestination(int destination) {
        this.destination = destination;
    }

    /**
     * Writes the payload.
     *
     * @param out where to write
     */
    protected abstract void exportPayload(MessageExporter out);

    /**
     * The exact number of bytes {@link #exportPayload} will write, or -1 if
     * that is not known in advance (the default). When it is known and the
     * message fits one frame, the message is serialised straight into the
     * connection's send ring, with no copy; otherwise into a buffer that is
     * then copied into the ring. A value that does not match what
     * {@code exportPayload} writes fails the send with an
     * {@link IllegalStateException} (nothing is delivered, later messages
     * are unaffected). {@code exportPayload} then runs while the ring space
     * is reserved: it must not send messages itself.
     *
     * @return the payload size in bytes, or -1
     */
    protected int payloadSize() {
        return -1;
    }

    /**
     * Reads the payload written by {@link #exportPayload}.
     *
     * @param in where to read from
     */
    protected abstract void importPayload(MessageImporter in);
}
