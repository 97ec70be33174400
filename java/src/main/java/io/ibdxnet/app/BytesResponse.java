package io.ibdxnet.app;

import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.MessageType;
import io.ibdxnet.Response;

/** The answer to a {@link BytesRequest}, carrying a byte array of its own. */
public final class BytesResponse extends Response {
    public static final MessageType TYPE = MessageType.of(1, 3);

    public byte[] bytes = new byte[0];

    /** For receiving. */
    public BytesResponse() {
        super(TYPE);
    }

    /** The answer to {@code request} carrying {@code bytes}. */
    public BytesResponse(BytesRequest request, byte[] bytes) {
        super(request, TYPE);
        this.bytes = bytes;
    }

    /** The answer to {@code request} carrying its bytes back. */
    public static BytesResponse echo(BytesRequest request) {
        return new BytesResponse(request, request.bytes);
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
