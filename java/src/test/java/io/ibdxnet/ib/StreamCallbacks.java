package io.ibdxnet.ib;


import io.ibdxnet.memory.Memory;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Test callbacks: stream {@code limit} pattern bytes to one target through its
 * send ring, managing the ring's front / front-posted / back positions the
 * way the IB transport's outgoing ring buffer does; check received bytes.
 */
final class StreamCallbacks implements EngineCallbacks {
    final int me;
    final long limit;
    volatile NativeEngine engine;
    private volatile int target = -1;
    private long ring;
    private int connection;
    private int ringSize;
    private long written;
    private long posted;
    final AtomicLong confirmed = new AtomicLong();
    final AtomicLong received = new AtomicLong();
    final AtomicLong corrupt = new AtomicLong();
    final AtomicReference<String> events = new AtomicReference<>("");
    private final PrevWorkResults prev = new PrevWorkResults();
    private final CompletedWorkList completed = new CompletedWorkList();
    private final NextWorkPackage next = new NextWorkPackage();
    private final IncomingRing in = new IncomingRing();

    StreamCallbacks(int me, long limit) {
        this.me = me;
        this.limit = limit;
    }

    static byte pattern(int src, int dst, long pos) {
        return (byte) ((pos ^ (pos >>> 8) ^ (pos >>> 17)) + src * 31 + dst * 17);
    }

    void startSending(int node, NativeEngine.RingHandle handle, int size) {
        ring = handle.ringAddress;
        connection = handle.connectionId;
        ringSize = size;
        target = node;
    }

    @Override
    public int nextDataToSend(long prevAddr, long completedAddr, long nextAddr) {
        int t = target;
        if (t < 0) {
            return OK;
        }
        prev.wrap(prevAddr);
        if (prev.nodeId() == t) {
            posted += prev.bytesPosted();
        }
        completed.wrap(completedAddr);
        for (int i = 0; i < completed.count(); i++) {
            if (completed.nodeId(i) == t) {
                confirmed.addAndGet(completed.bytes(i));
            }
        }
        long back = Math.min(confirmed.get() + ringSize, limit);
        while (written < back) {
            Memory.putByte(ring + (written & (ringSize - 1)), pattern(me, t, written));
            written++;
        }
        if (written > posted) {
            // Names the connection: the engine posts only from that connection's ring.
            next.wrap(nextAddr).set(t, 0, posted & (ringSize - 1), written - posted, connection);
        }
        return OK;
    }

    @Override
    public int received(long ringAddr) {
        in.wrap(ringAddr);
        int n = in.used();
        for (int i = 0; i < n; i++) {
            int id = in.bufferId(i);
            if (id == IncomingRing.NO_BUFFER) {
                continue;
            }
            long data = in.dataAddress(i);
            int len = in.dataLength(i);
            int src = in.sourceNodeId(i);
            long base = received.get();
            for (int k = 0; k < len; k++) {
                if (Memory.getByte(data + k) != pattern(src, me, base + k)) {
                    corrupt.incrementAndGet();
                }
            }
            received.addAndGet(len);
            engine.returnBuffer(id);
        }
        return EngineCallbacks.consumed(n);
    }

    @Override
    public void nodeEvent(int kind, int nodeId, long value) {
        events.updateAndGet(s -> s + kind + ":" + nodeId + " ");
    }
}
