package io.ibdxnet;

/**
 * Stands for a received request of a type this node cannot create (not
 * registered), so that it can be answered with an error like any other:
 * carries only what the error response needs (source, type, request id).
 */
final class RefusedRequest extends Request<Response> {
    RefusedRequest(int source, byte type, byte subtype, int requestId) {
        super(type, subtype);
        this.source = source;
        this.requestId = requestId;
    }

    @Override
    protected void exportPayload(MessageExporter out) {}

    @Override
    protected int payloadSize() {
        return 0;
    }

    @Override
    protected void importPayload(MessageImporter in) {}
}
