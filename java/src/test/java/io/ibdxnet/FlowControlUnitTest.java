package io.ibdxnet;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;

/**
 * Nodes with different flow-control settings: each receiver confirms in its
 * sender's unit (named when the connection is set up), so no sender is over-
 * or under-credited. Before, a receiver confirmed in its own unit: the node
 * with the small unit over-credited its peer (unconfirmed bytes went negative,
 * the peer ran past its window) and the one with the large unit starved its
 * peer into the send timeout.
 */
@RunWith(Parameterized.class)
public class FlowControlUnitTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return new Object[] {"ib", "nio", "loopback"};
    }

    @Parameterized.Parameter
    public String transport;

    private static final long[] WINDOW = {1 << 20, 4 << 20};
    private static final double[] THRESHOLD = {0.1, 0.5};
    private static final int MESSAGES = 2000;
    private static final int SIZE = 8 << 10; // 2000 × 8 KiB = 16 MiB each way: 16 and 4 windows
    /** Frames in flight beyond the window: the window admits a frame, then checks (one sender thread each). */
    private static final long SLACK = 2 * (SIZE + 256);

    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    @Test
    public void nodesWithDifferentWindowsAndThresholdsNeitherOverrunNorStall() throws Exception {
        for (int i = 0; i < 2; i++) {
            DXNetConfig c = new DXNetConfig(i);
            c.transport = transport;
            c.listen = "127.0.0.1:0";
            c.handlerThreads = 1;
            // Bytes are confirmed once handled, so a held handler fills the window;
            // a small handler queue also stops the parsing early (kept from when
            // bytes were confirmed once parsed and only that filled it).
            c.handlerQueueSize = 4;
            TestSupport.smallSimNode(c);
            c.flowControlWindow = WINDOW[i];
            c.flowControlThreshold = THRESHOLD[i];
            // A stall (under-credit) fails fast instead of at the default 10 s.
            c.sendTimeoutMs = 5_000;
            DXNet n = DXNet.start(c);
            n.registerMessageType(DataMessage.TYPE, DataMessage.DATA, DataMessage.class);
            nodes.add(n);
        }
        DXNet a = nodes.get(0);
        DXNet b = nodes.get(1);
        a.addNode(1, "127.0.0.1:" + b.localPort());
        b.addNode(0, "127.0.0.1:" + a.localPort());
        AtomicLongArray handled = new AtomicLongArray(2);
        AtomicLong broken = new AtomicLong();
        for (int i = 0; i < 2; i++) {
            final int me = i;
            nodes.get(i).register(DataMessage.TYPE, DataMessage.DATA, m -> {
                DataMessage d = (DataMessage) m;
                if (!d.intact() || d.seq != handled.get(me)) {
                    broken.incrementAndGet(); // corrupt, lost or out of order
                }
                handled.incrementAndGet(me);
                if (d.seq == 0) {
                    // Hold the first message until the peer's sender has filled most of
                    // its window (at most 2 s, within its 5 s send timeout): flow control
                    // is then exercised however fast this machine's handlers are.
                    DXNet peer = nodes.get(1 - me);
                    long until = System.nanoTime() + 2_000_000_000L;
                    while (peer.transportStats().get("unconfirmed_bytes") < WINDOW[1 - me] * 3 / 4
                            && System.nanoTime() - until < 0) {
                        LockSupport.parkNanos(100_000);
                    }
                }
                LockSupport.parkNanos(50_000); // a slow handler: the window fills
            });
        }
        // The gauge each sender keeps: never below 0 (over-credited), never past its own window.
        long[] min = {Long.MAX_VALUE, Long.MAX_VALUE};
        long[] max = {Long.MIN_VALUE, Long.MIN_VALUE};
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> senders = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            final int from = i;
            Thread t = new Thread(() -> {
                try {
                    for (int s = 0; s < MESSAGES; s++) {
                        nodes.get(from).sendMessage(new DataMessage(1 - from, 0, s, SIZE));
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "sender-" + i);
            senders.add(t);
            t.start();
        }
        while (senders.get(0).isAlive() || senders.get(1).isAlive()) {
            for (int i = 0; i < 2; i++) {
                long u = nodes.get(i).transportStats().get("unconfirmed_bytes");
                min[i] = Math.min(min[i], u);
                max[i] = Math.max(max[i], u);
            }
            LockSupport.parkNanos(200_000);
        }
        for (Thread t : senders) {
            t.join();
        }
        if (failure.get() != null) {
            throw new AssertionError("a sender failed (stalled into its send timeout?): " + failure.get(), failure.get());
        }
        waitFor("every message handled (" + handled + ")", () -> handled.get(0) == MESSAGES && handled.get(1) == MESSAGES);
        assertEquals("corrupt, lost or reordered messages", 0, broken.get());
        for (int i = 0; i < 2; i++) {
            String who = transport + " node " + i + " (window " + WINDOW[i] + ", threshold " + THRESHOLD[i] + ")";
            assertTrue(who + ": unconfirmed bytes went negative (over-credited): " + min[i], min[i] >= 0);
            assertTrue(who + ": unconfirmed bytes " + max[i] + " past its window", max[i] <= WINDOW[i] + SLACK);
            assertTrue(who + ": the window never filled (the test did not test flow control): " + max[i],
                    max[i] > WINDOW[i] / 2);
        }
        // Everything handled was confirmed, up to less than one of the sender's units.
        for (int i = 0; i < 2; i++) {
            final int n = i;
            long unit = (long) (WINDOW[i] * THRESHOLD[i]);
            waitFor("node " + i + "'s confirmations", () -> nodes.get(n).transportStats().get("unconfirmed_bytes") < unit);
        }
    }
}
