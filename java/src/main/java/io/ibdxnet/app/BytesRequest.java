package io.ibdxnet.app;

import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.MessageType;
import io.ibdxnet.Request;

/** A request that carries a byte array; answered by a {@link BytesResponse}. */
public final class BytesRequest extends Request<BytesResponse> {
    public static final MessageType TYPE = MessageType.of(1, 2);

    public byte[] bytes = new byte[0];

    /** For receiving. */
    public BytesRequest() {
        super(TYPE);
    }

    /** {@code bytes} for node {@code dest}. */
    public BytesRequest(int dest, byte[] bytes) {
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
