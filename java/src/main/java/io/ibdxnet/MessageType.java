package io.ibdxnet;

/**
 * A message type id: {@code type} and {@code subtype}, each 0..255, as a
 * named constant instead of two {@code byte} literals:
 *
 * <pre>static final MessageType PUT = MessageType.of(7, 1);</pre>
 */
public final class MessageType {
    private final byte type;
    private final byte subtype;

    private MessageType(byte type, byte subtype) {
        this.type = type;
        this.subtype = subtype;
    }

    /**
     * The id {@code type/subtype}; each must be in 0..255.
     *
     * @param type the type, 0..255
     * @param subtype the subtype, 0..255
     * @return the id
     * @throws IllegalArgumentException if either is out of range
     */
    public static MessageType of(int type, int subtype) {
        if (type < 0 || type > 255 || subtype < 0 || subtype > 255) {
            throw new IllegalArgumentException("message type " + type + "/" + subtype + ": type and subtype must be in 0..255");
        }
        return new MessageType((byte) type, (byte) subtype);
    }

    /**
     * The type byte on the wire.
     *
     * @return the type byte
     */
    public byte type() {
        return type;
    }

    /**
     * The subtype byte on the wire.
     *
     * @return the subtype byte
     */
    public byte subtype() {
        return subtype;
    }

    /** Same type and subtype. */
    @Override
    public boolean equals(Object o) {
        return o instanceof MessageType && ((MessageType) o).type == type && ((MessageType) o).subtype == subtype;
    }

    /** Consistent with {@link #equals}. */
    @Override
    public int hashCode() {
        return (type & 0xFF) << 8 | (subtype & 0xFF);
    }

    /** {@code type/subtype}, both unsigned. */
    @Override
    public String toString() {
        return (type & 0xFF) + "/" + (subtype & 0xFF);
    }
}
