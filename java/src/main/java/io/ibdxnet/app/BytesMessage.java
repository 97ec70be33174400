package io.ibdxnet.app;

import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.MessageType;

/**
 * A message that carries a byte array: the demo's data message, and the one
 * the benchmarks and tests send when only the bytes matter.
 */
public final class BytesMessage extends Message {
    public static final MessageType TYPE = MessageType.of(1, 1);

    public byte[] bytes = new byte[0];

    /** For receiving. */
    public BytesMessage() {
        super(TYPE);
    }

    /** {@code bytes} for node {@code dest}. */
    public BytesMessage(int dest, byte[] bytes) {
        super(dest, TYPE);
        this.bytes = bytes;
    }

    @Override
    protected void exportPayload(MessageExporter out) {
        out.writeByteArray(bytes);
    }

    /** Known: the message is serialised straight into the send ring. */
    @Override
    protected int payloadSize() {
        return 4 + bytes.length;
    }

    @Override
    protected void importPayload(MessageImporter in) {
        bytes = in.readByteArray();
    }
}
