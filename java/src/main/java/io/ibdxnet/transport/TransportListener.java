package io.ibdxnet.transport;

/** What a transport reports to the messaging core. */
public interface TransportListener {
    /**
     * Received bytes from {@code buffer.source}, in stream order. Returns false
     * if the core cannot take more now (the transport retries later).
     */
    boolean onBuffer(IncomingBuffer buffer);

    /** The connection to {@code node} failed or closed. */
    void onDisconnected(int node);
}
