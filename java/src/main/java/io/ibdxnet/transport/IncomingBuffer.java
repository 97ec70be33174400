package io.ibdxnet.transport;

/**
 * Received bytes of the stream from one node, in native memory, handed from
 * a transport to the incoming buffer queue. {@link #release} gives the
 * memory back to the transport once the bytes were parsed.
 */
public final class IncomingBuffer {
    public final int source;
    public final long address;
    public final int length;
    /**
     * Which connection from {@code source} delivered the bytes: the stream
     * starts afresh when it changes (a new connection after a failure).
     */
    public final int connection;
    /**
     * Bytes of it the core has parsed so far: more than 0 only while its
     * stream waits for the node's unfinished-message budget in the middle of
     * it (the core's receive path only).
     */
    public int parsed;
    private final int id;
    private final BufferReleaser releaser;

    /** Gives processed buffers back to their transport. */
    @FunctionalInterface
    public interface BufferReleaser {
        void release(int id);
    }

    public IncomingBuffer(int source, long address, int length, int connection, int id, BufferReleaser releaser) {
        this.source = source;
        this.connection = connection;
        this.address = address;
        this.length = length;
        this.id = id;
        this.releaser = releaser;
    }

    public void release() {
        releaser.release(id);
    }
}
