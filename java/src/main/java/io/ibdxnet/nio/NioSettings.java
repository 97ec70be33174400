package io.ibdxnet.nio;

import io.ibdxnet.transport.AuthKey;

/**
 * Settings of one transport instance; the factory beside {@code DXNet}
 * fills them from the configuration (this package sits below it).
 */
public final class NioSettings {
    public int nodeId;
    public String listenHost = "0.0.0.0";
    public int listenPort;
    public long flowControlWindow;
    public double flowControlThreshold;
    public int connectTimeoutMs;
    public int maxConnections;
    public int bufferSize;
    public int bufferCount;
    public int ringSize;
    public int keepAliveMs;
    public int idleTimeoutMs;
    /** Accept a hello only from an address the node table gives for the claimed node. */
    public boolean checkPeerAddress;
    /** The pre-shared key, or null: with one, connections start with a mutual challenge–response. */
    public AuthKey authKey;
    /** An incoming connection's whole handshake (hello, and the proof when keyed) must end within this. */
    public int helloTimeoutMs = 2_000;

    /** The incoming handshake's deadline: {@link #helloTimeoutMs}, never more than {@link #connectTimeoutMs}. */
    int handshakeDeadlineMs() {
        return Math.min(helloTimeoutMs, connectTimeoutMs);
    }
}
