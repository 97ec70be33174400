package io.ibdxnet.core;

/**
 * What the stream assemblers of one node may hold: the largest message a
 * peer may announce, and the bytes that unfinished messages (announced by a
 * first frame, not yet complete) may claim per connection and for the whole
 * node. Used by the message creation coordinator only (one thread).
 */
public final class ReceiveLimits {
    /** Accounted per unfinished message on top of its bytes (object and map entry). */
    static final long OVERHEAD = 64;
    final int maxMessageSize;
    final long perConnection;
    final long perNode;
    /** Written by the coordinator only; volatile for the gauge. */
    private volatile long claimed;

    public ReceiveLimits(int maxMessageSize, long perConnection, long perNode) {
        this.maxMessageSize = maxMessageSize;
        this.perConnection = perConnection;
        this.perNode = perNode;
    }

    /** Bytes claimed by unfinished messages of every connection. */
    public long claimed() {
        return claimed;
    }

    boolean claim(long bytes) {
        if (claimed + bytes > perNode) {
            return false;
        }
        claimed += bytes;
        return true;
    }

    void release(long bytes) {
        claimed -= bytes;
    }
}
