package io.ibdxnet.internal;

import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.Request;
import io.ibdxnet.Response;

/**
 * Stands for a received request of a type this node cannot create (not
 * registered), so that it can be answered with an error like any other:
 * carries only what the error response needs (source, type, request id).
 */
public final class RefusedRequest extends Request<Response> {
    private static final ApiAccess API = ApiAccess.get();

    RefusedRequest(int source, byte type, byte subtype, int requestId) {
        super(type, subtype);
        API.setSource(this, source);
        API.setRequestId(this, requestId);
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
