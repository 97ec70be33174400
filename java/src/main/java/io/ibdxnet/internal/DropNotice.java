package io.ibdxnet.internal;

import io.ibdxnet.MessageExporter;

/**
 * Tells a node that plain messages it sent were dropped here, nobody to hand
 * them to ({@link DropNotices} sums them). On the wire it is an error
 * response that answers no request: flags {@code RESPONSE | ERROR}, request
 * id 0 (never a request's), type 0/0; its payload is an error response's two
 * strings — this class's name ({@link #MARKER}) and the causes, each naming a
 * type — followed by the number of messages (i64) and their payload bytes
 * (i64). A node that knows no notices reads it as a late answer to a request
 * that is not pending and drops it (counted in its {@code droppedMessages()}),
 * no more: no new frame flag (which an older assembler would take for a
 * protocol violation and close the connection for).
 */
public final class DropNotice extends ErrorResponse {
    /** The remote class an error response carries when it is a notice. */
    public static final String MARKER = DropNotice.class.getName();
    /** Longest causes text sent (and taken from a peer). */
    public static final int MAX_CAUSES_CHARS = 1_000;

    private final long messages;
    private final long bytes;

    public DropNotice(int destination, long messages, long bytes, String causes) {
        super(destination, MARKER, causes.length() <= MAX_CAUSES_CHARS ? causes : causes.substring(0, MAX_CAUSES_CHARS) + "…");
        this.messages = messages;
        this.bytes = bytes;
    }

    @Override
    protected void exportPayload(MessageExporter out) {
        super.exportPayload(out);
        out.writeLong(messages);
        out.writeLong(bytes);
    }

    @Override
    protected int payloadSize() {
        return super.payloadSize() + 2 * Long.BYTES;
    }
}
