package io.ibdxnet.transport;

/** What a transport reports to the messaging core. */
public interface TransportListener {
    /**
     * Received bytes from {@code buffer.source}, in stream order. Returns false
     * if the core cannot take more now (the transport retries later).
     */
    boolean onBuffer(IncomingBuffer buffer);

    /** A connection this node sends to {@code node} on was established. */
    default void onConnected(int node) {}

    /** The connection to {@code node} failed or closed. */
    void onDisconnected(int node);

    /**
     * A connection to {@code node} failed while {@code bytes} that senders had
     * handed over were not confirmed by the receiver: they may be lost
     * ({@code bytes} is -1 where the transport cannot tell how much).
     */
    default void onPossibleLoss(int node, long bytes, String reason) {}
}
