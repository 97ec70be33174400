package io.ibdxnet.ib;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;

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
    private volatile long written;
    private long posted;
    final AtomicLong confirmed = new AtomicLong();
    final AtomicLong received = new AtomicLong();
    final AtomicLong corrupt = new AtomicLong();
    final AtomicReference<String> events = new AtomicReference<>("");
    private final PrevWorkResults prev = new PrevWorkResults();
    private final CompletedWorkList completed = new CompletedWorkList();
    private final NextWorkPackage next = new NextWorkPackage();
    private final IncomingRing in = new IncomingRing();

    /** Points in {@link #nextDataToSend} where {@link #faults} may throw. */
    static final int FAULT_BEFORE = 0, FAULT_AFTER_PREV = 1, FAULT_AFTER_ENTRY = 2, FAULT_BEFORE_ACK = 3;
    /** Test hook: called at each fault point; may throw. */
    volatile java.util.function.IntConsumer faults;
    /** Calls in which more was confirmed than posted (a confirmation applied twice). */
    final AtomicLong overConfirmed = new AtomicLong();

    private void fault(int point) {
        java.util.function.IntConsumer f = faults;
        if (f != null) {
            f.accept(point);
        }
    }

    /** Bytes written into the ring and not yet confirmed. */
    long unconfirmed() {
        return written - confirmed.get();
    }

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
        fault(FAULT_BEFORE);
        prev.wrap(prevAddr);
        completed.wrap(completedAddr);
        if (prev.nodeId() == t) {
            posted += prev.bytesPosted();
        }
        completed.markPrevApplied();
        fault(FAULT_AFTER_PREV);
        for (int i = 0; i < completed.count(); i++) {
            if (completed.nodeId(i) == t) {
                confirmed.addAndGet(completed.bytes(i));
                completed.markApplied(i);
                fault(FAULT_AFTER_ENTRY);
            }
        }
        if (confirmed.get() > posted) {
            overConfirmed.incrementAndGet(); // confirmed more than was ever posted: applied twice
        }
        fault(FAULT_BEFORE_ACK);
        completed.acknowledge();
        long back = Math.min(confirmed.get() + ringSize, limit);
        long w = written;
        while (w < back) {
            Memory.putByte(ring + (w & (ringSize - 1)), pattern(me, t, w));
            w++;
        }
        written = w;
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

    /**
     * Connects engine {@code ea} (node 0, callbacks {@code a}) and {@code eb}
     * (node 1, {@code b}), streams {@code limit} bytes each way and checks
     * that everything was confirmed and arrived intact.
     */
    static void streamBothWays(NativeEngine ea, StreamCallbacks a, NativeEngine eb, StreamCallbacks b, long limit)
            throws Exception {
        a.engine = ea;
        b.engine = eb;
        ea.addNode(1, "127.0.0.1", eb.localPort());
        eb.addNode(0, "127.0.0.1", ea.localPort());
        a.startSending(1, ea.connect(1, 10_000), ea.ringSize());
        b.startSending(0, eb.connect(0, 10_000), eb.ringSize());
        waitFor("a's data confirmed", () -> a.confirmed.get() >= limit);
        waitFor("b's data confirmed", () -> b.confirmed.get() >= limit);
        waitFor("all received", () -> a.received.get() >= limit && b.received.get() >= limit);
        assertEquals(limit, a.received.get());
        assertEquals(limit, b.received.get());
        assertEquals(0, a.corrupt.get() + b.corrupt.get());
    }

    /** Engine settings of a small node {@code node} on the sim fabric, listening on any local port. */
    static java.util.Map<String, String> simConfig(int node) {
        java.util.Map<String, String> c = new java.util.HashMap<>();
        c.put("node_id", Integer.toString(node));
        c.put("listen", "127.0.0.1:0");
        c.put("fabric", "sim");
        c.put("send_ring_size", Integer.toString(1 << 20));
        c.put("srq_size", "128");
        c.put("recv_buffer_count", "1024");
        c.put("connect_timeout_ms", "10000");
        return c;
    }
}
