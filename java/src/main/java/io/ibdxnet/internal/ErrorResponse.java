package io.ibdxnet.internal;

import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.Request;
import io.ibdxnet.Response;

/**
 * What a failed request handler sends back instead of a response (never
 * registered: a frame flagged {@code ERROR} carries it, and the requester
 * reads the two strings as a {@link RemoteHandlerException}). A
 * {@link DropNotice} is one that answers no request.
 */
public class ErrorResponse extends Response {
    final String remoteClass;
    final String remoteMessage;

    public ErrorResponse(Request<?> failed, Throwable e) {
        super(failed, failed.getType(), failed.getSubtype());
        this.remoteClass = e.getClass().getName();
        this.remoteMessage = e.getMessage() == null ? "" : e.getMessage();
    }

    /** An error response to {@code destination} that answers no request (request id 0, type 0/0). */
    ErrorResponse(int destination, String remoteClass, String remoteMessage) {
        super((byte) 0, (byte) 0);
        setDestination(destination);
        this.remoteClass = remoteClass;
        this.remoteMessage = remoteMessage;
    }

    @Override
    protected void exportPayload(MessageExporter out) {
        out.writeString(remoteClass);
        out.writeString(remoteMessage);
    }

    @Override
    protected int payloadSize() {
        return MessageExporter.stringSize(remoteClass) + MessageExporter.stringSize(remoteMessage);
    }

    @Override
    protected void importPayload(MessageImporter in) {
        throw new UnsupportedOperationException("read by IncomingPath.deliver");
    }
}
