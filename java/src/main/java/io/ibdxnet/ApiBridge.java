package io.ibdxnet;

import io.ibdxnet.internal.ApiAccess;
import io.ibdxnet.transport.RingRecord;

/**
 * The internals' access to this package's package-private members
 * ({@link ApiAccess}); installed when {@link ApiAccess} is first used.
 */
final class ApiBridge extends ApiAccess {
    static {
        ApiAccess.install(new ApiBridge());
    }

    private ApiBridge() {}

    @Override
    public void setSource(Message m, int source) {
        m.source = source;
    }

    @Override
    public int requestId(Response r) {
        return r.requestId;
    }

    @Override
    public void setRequestId(Response r, int requestId) {
        r.requestId = requestId;
    }

    @Override
    public void setRequestId(Request<?> r, int requestId) {
        r.requestId = requestId;
    }

    @Override
    public int payloadSize(Message m) {
        return m.payloadSize();
    }

    @Override
    public void exportPayload(Message m, MessageExporter out) {
        m.exportPayload(out);
    }

    @Override
    public void importPayload(Message m, MessageImporter in) {
        m.importPayload(in);
    }

    @Override
    public void reset(MessageExporter out) {
        out.reset();
    }

    @Override
    public int size(MessageExporter out) {
        return out.size();
    }

    @Override
    public byte[] array(MessageExporter out) {
        return out.array();
    }

    @Override
    public MessageExporter newRingExporter() {
        return new RingExporter();
    }

    @Override
    public void wrap(MessageExporter ring, RingRecord r, int base, int limit) {
        ((RingExporter) ring).wrap(r, base, limit);
    }

    @Override
    public void release(MessageExporter ring) {
        ((RingExporter) ring).release();
    }

    @Override
    public boolean overflowed(MessageExporter ring) {
        return ((RingExporter) ring).overflowed();
    }

    @Override
    public MessageImporter newImporter(byte[] buf, int length) {
        return new MessageImporter(buf, length);
    }

    @Override
    public MessageImporter newImporter(byte[] array, long at, int length) {
        return new MessageImporter(array, at, length);
    }

    @Override
    public MessageImporter reset(MessageImporter in, byte[] array, long at, int length) {
        return in.reset(array, at, length);
    }
}
