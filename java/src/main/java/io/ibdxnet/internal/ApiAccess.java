package io.ibdxnet.internal;

import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.Request;
import io.ibdxnet.Response;
import io.ibdxnet.transport.RingRecord;

/**
 * What the internals may do to the API's classes beyond their public
 * methods: set a message's source, a request's id, run a message's
 * serialisation, create importers and the in-place exporter. The API package
 * keeps these members package-private (users never see them); its
 * {@code io.ibdxnet.ApiBridge} implements this class and installs itself when
 * first asked for. Callers hold the instance in a {@code static final} field,
 * so the JIT inlines through it.
 */
public abstract class ApiAccess {
    private static ApiAccess instance;

    static {
        try {
            // By name: the API package is above this one (its bridge's static initializer calls install).
            Class.forName("io.ibdxnet.ApiBridge", true, ApiAccess.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** For the bridge only. */
    protected ApiAccess() {}

    /** Called once, by {@code io.ibdxnet.ApiBridge}'s static initializer. */
    public static synchronized void install(ApiAccess access) {
        if (instance != null) {
            throw new IllegalStateException("ApiAccess is installed already");
        }
        instance = access;
    }

    /** The bridge. */
    public static synchronized ApiAccess get() {
        if (instance == null) {
            throw new IllegalStateException("io.ibdxnet.ApiBridge did not install itself");
        }
        return instance;
    }

    /** Sets the node {@code m} comes from. */
    public abstract void setSource(Message m, int source);

    /** The id a response carries. */
    public abstract int requestId(Response r);

    /** Sets the id a response carries. */
    public abstract void setRequestId(Response r, int requestId);

    /** Sets a request's id. */
    public abstract void setRequestId(Request<?> r, int requestId);

    /** {@code m.payloadSize()}. */
    public abstract int payloadSize(Message m);

    /** {@code m.exportPayload(out)}. */
    public abstract void exportPayload(Message m, MessageExporter out);

    /** {@code m.importPayload(in)}. */
    public abstract void importPayload(Message m, MessageImporter in);

    /** Empties a heap exporter. */
    public abstract void reset(MessageExporter out);

    /** The bytes written to {@code out}. */
    public abstract int size(MessageExporter out);

    /** A heap exporter's buffer. */
    public abstract byte[] array(MessageExporter out);

    /** An exporter that writes into a send ring's record ({@link #wrap}). */
    public abstract MessageExporter newRingExporter();

    /** Points a ring exporter at {@code limit} bytes from {@code base} of {@code r}. */
    public abstract void wrap(MessageExporter ring, RingRecord r, int base, int limit);

    /** Drops a ring exporter's record. */
    public abstract void release(MessageExporter ring);

    /** Whether a ring exporter was asked to write beyond its limit. */
    public abstract boolean overflowed(MessageExporter ring);

    /** An importer over {@code length} bytes of a heap array. */
    public abstract MessageImporter newImporter(byte[] buf, int length);

    /** An importer over {@code length} bytes at {@code at} (of {@code array}, or native memory when it is null). */
    public abstract MessageImporter newImporter(byte[] array, long at, int length);

    /** Points {@code in} at other bytes; returns it. */
    public abstract MessageImporter reset(MessageImporter in, byte[] array, long at, int length);
}
