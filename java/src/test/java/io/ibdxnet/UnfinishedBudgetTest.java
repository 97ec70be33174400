package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;

/**
 * Honest load larger than the node's unfinished-message budget: many
 * senders, each sending max-size messages at once, to one receiver. The
 * budget holds senders back (their bytes wait unconfirmed) instead of
 * closing their connections as violators: no violation, nothing lost, every
 * sender finishes. Before, the connection whose claim crossed the node budget
 * was closed as a "protocol violation" and its messages were lost. Meanwhile
 * another node's small requests are answered: held-back streams hold back
 * their own senders only.
 *
 * <p>Scaled 1/16 in CI (maxMessageSize 4 MiB, 16 MiB per connection, 64 MiB
 * per node, as issue 19 measured it). {@code -Dtest.budgetDefaults=true}
 * runs it at the defaults (64 MiB, 256 MiB, 1 GiB): a measurement, it needs
 * several GiB of heap. {@code test.budgetSenders} and
 * {@code test.budgetMessages} change the load, {@code test.budgetSendTimeoutMs}
 * the senders' {@code sendTimeoutMs} (a sender held back waits for its turn
 * within it), {@code test.budgetTransports} the transports (comma-separated).
 */
@RunWith(Parameterized.class)
public class UnfinishedBudgetTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return System.getProperty("test.budgetTransports", "loopback,nio,ib").split(",");
    }

    @Parameterized.Parameter
    public String transport;

    static final byte TYPE = 61;
    static final byte BULK = 1;
    private static final boolean DEFAULTS = Boolean.getBoolean("test.budgetDefaults");
    private static final int SENDERS = Integer.getInteger("test.budgetSenders", 32);
    private static final int MESSAGES = Integer.getInteger("test.budgetMessages", 2);
    private static final Integer SEND_TIMEOUT_MS = Integer.getInteger("test.budgetSendTimeoutMs");

    /** The bytes every message carries after its two ints: one array shared by all senders. */
    private static byte[] shared;

    /** A max-size message: sender, sequence number, then the shared bytes (checked without a copy). */
    public static final class Bulk extends Message {
        int sender;
        int seq;
        boolean intact;

        public Bulk() {
            super(TYPE, BULK);
        }

        Bulk(int dest, int sender, int seq) {
            super(dest, TYPE, BULK);
            this.sender = sender;
            this.seq = seq;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeInt(sender);
            out.writeInt(seq);
            out.writeBytes(shared, 0, shared.length);
        }

        @Override
        protected int payloadSize() {
            return 8 + shared.length;
        }

        @Override
        protected void importPayload(MessageImporter in) {
            sender = in.readInt();
            seq = in.readInt();
            byte[] chunk = new byte[64 << 10];
            boolean same = in.remaining() == shared.length;
            for (int at = 0; same && at < shared.length; at += chunk.length) {
                int n = Math.min(chunk.length, shared.length - at);
                in.readBytes(chunk, 0, n);
                same = Arrays.equals(chunk, 0, n, shared, at, at + n);
            }
            intact = same;
        }
    }

    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    private DXNet node(int id) throws NetworkException {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = transport;
        c.listen = "127.0.0.1:0";
        c.handlerThreads = 1;
        TestSupport.smallSimNode(c);
        if (!DEFAULTS) {
            c.maxMessageSize = 4 << 20;
            c.maxUnfinishedBytesPerConnection = 16 << 20;
            c.maxUnfinishedBytes = 64 << 20;
        } else {
            c.flowControlWindow = new DXNetConfig(id).flowControlWindow;
        }
        if (SEND_TIMEOUT_MS != null) {
            c.sendTimeoutMs = SEND_TIMEOUT_MS;
        }
        DXNet n = DXNet.start(c);
        n.registerMessageType(TYPE, BULK, Bulk.class);
        n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        nodes.add(n);
        return n;
    }

    @Test
    public void manyHonestSendersOfMaxSizeMessagesAllArriveWithoutViolations() throws Exception {
        DXNet receiver = node(0);
        DXNetConfig rc = new DXNetConfig(0);
        int max = DEFAULTS ? rc.maxMessageSize : 4 << 20;
        long perNode = DEFAULTS ? rc.maxUnfinishedBytes : 64 << 20;
        assertTrue("the load must exceed the node budget", (long) SENDERS * max > perNode);
        shared = new byte[max - 8];
        for (int i = 0; i < shared.length; i++) {
            shared[i] = (byte) (i * 31 + 7);
        }
        List<DXNet> senders = new ArrayList<>();
        for (int i = 1; i <= SENDERS; i++) {
            DXNet s = node(i);
            s.addNode(0, "127.0.0.1:" + receiver.localPort());
            receiver.addNode(i, "127.0.0.1:" + s.localPort());
            senders.add(s);
        }
        AtomicIntegerArray handled = new AtomicIntegerArray(SENDERS + 1);
        AtomicLong broken = new AtomicLong();
        receiver.register(TYPE, BULK, m -> {
            Bulk b = (Bulk) m;
            if (!b.intact || b.sender != m.getSource() || b.seq != handled.get(b.sender)) {
                broken.incrementAndGet(); // corrupt, misattributed or out of order
            }
            handled.incrementAndGet(b.sender);
        });
        ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        for (DXNet s : senders) {
            s.setLossListener((node, bytes, reason) -> failures.add("possible loss at " + node + ": " + bytes + " bytes, " + reason));
        }
        receiver.register(BytesRequest.TYPE, m -> receiver.reply((BytesRequest) m, BytesResponse.echo((BytesRequest) m)));
        DXNet pinger = node(SENDERS + 1);
        pinger.addNode(0, "127.0.0.1:" + receiver.localPort());
        receiver.addNode(SENDERS + 1, "127.0.0.1:" + pinger.localPort());
        pinger.sendSync(new BytesRequest(0, new byte[8])); // connected before the load starts
        List<Long> rtts = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int i = 1; i <= SENDERS; i++) {
            DXNet s = senders.get(i - 1);
            int me = i;
            Thread t = new Thread(() -> {
                try {
                    go.await();
                    for (int q = 0; q < MESSAGES; q++) {
                        s.sendMessage(new Bulk(0, me, q));
                    }
                } catch (Throwable e) {
                    failures.add("sender " + me + ": " + e);
                }
            }, "bulk-sender-" + i);
            threads.add(t);
            t.start();
        }
        Thread pings = new Thread(() -> {
            try {
                go.await();
                while (threads.stream().anyMatch(Thread::isAlive)) {
                    long t0 = System.nanoTime();
                    pinger.sendSync(new BytesRequest(0, new byte[8]));
                    rtts.add(System.nanoTime() - t0);
                    Thread.sleep(5);
                }
            } catch (Throwable e) {
                failures.add("pinger: " + e);
            }
        }, "pinger");
        pings.start();
        long start = System.nanoTime();
        go.countDown();
        long peakClaimed = 0;
        long deadline = start + 200_000_000_000L;
        // Until every sender returned (or failed), then until the handlers stop making progress.
        int seen = -1;
        long lastProgress = System.nanoTime();
        long lastHandled = start;
        boolean stallDumped = false;
        while (System.nanoTime() - deadline < 0 && total(handled) < SENDERS * MESSAGES) {
            peakClaimed = Math.max(peakClaimed, receiver.transportStats().get("unfinished_bytes_claimed"));
            boolean sending = threads.stream().anyMatch(Thread::isAlive);
            if (total(handled) != seen) {
                lastHandled = System.nanoTime();
            }
            if (total(handled) != seen) {
                stallDumped = false;
            } else if (!stallDumped && System.nanoTime() - lastHandled > 3_000_000_000L) {
                stallDumped = true; // nothing handled for 3 s: say where every thread is (a stall is a bug)
                System.out.println("UnfinishedBudgetTest " + transport + ": nothing handled for 3 s, "
                        + receiver.transportStats() + "\n" + TestSupport.threadDump());
            }
            if (total(handled) != seen || sending) {
                seen = total(handled);
                lastProgress = System.nanoTime();
            } else if (System.nanoTime() - lastProgress > 3_000_000_000L) {
                break; // the rest is not coming
            }
            Thread.sleep(10); // transportStats() scans the connection table: not every millisecond
        }
        for (Thread t : threads) {
            t.join(1_000);
        }
        pings.join(15_000);
        List<Long> sorted = new ArrayList<>(rtts);
        Collections.sort(sorted);
        long ms = (Math.max(lastHandled, total(handled) == SENDERS * MESSAGES ? System.nanoTime() : 0) - start) / 1_000_000;
        Map<String, Long> stats = receiver.transportStats();
        int finished = 0;
        for (int i = 1; i <= SENDERS; i++) {
            finished += handled.get(i) == MESSAGES ? 1 : 0;
        }
        String report = transport + ": " + SENDERS + " senders x " + MESSAGES + " messages of " + max + " bytes, node budget "
                + perNode + ": " + total(handled) + " handled, " + (SENDERS * MESSAGES - total(handled)) + " lost, "
                + stats.get("protocol_violations") + " violations, " + stats.get("partial_messages_dropped")
                + " partial messages dropped, " + finished + " of " + SENDERS + " senders finished, " + failures.size()
                + " sender failures, peak unfinished_bytes_claimed " + peakClaimed + ", at the end "
                + stats.get("unfinished_bytes_claimed") + ", " + ms + " ms; another node's "
                + sorted.size() + " requests meanwhile: median " + ms(sorted, 0.5) + " ms, max " + ms(sorted, 1.0) + " ms";
        System.out.println("UnfinishedBudgetTest " + report);
        assertEquals(report, 0L, (long) stats.get("protocol_violations"));
        assertTrue(report + "; first failures: " + first(failures), failures.isEmpty());
        assertEquals(report, SENDERS * MESSAGES, total(handled));
        assertEquals(report, 0L, broken.get());
        assertEquals(report, 0L, (long) stats.get("partial_messages_dropped"));
        assertTrue(report, peakClaimed <= perNode);
        assertEquals("every claim given back: " + report, 0L, (long) stats.get("unfinished_bytes_claimed"));
        assertTrue(report, !sorted.isEmpty());
    }

    /** The {@code q} quantile of sorted nanoseconds, in ms. */
    private static double ms(List<Long> sorted, double q) {
        if (sorted.isEmpty()) {
            return Double.NaN;
        }
        return sorted.get((int) Math.min(sorted.size() - 1, Math.round(q * (sorted.size() - 1)))) / 1e6;
    }

    private static int total(AtomicIntegerArray a) {
        int n = 0;
        for (int i = 0; i < a.length(); i++) {
            n += a.get(i);
        }
        return n;
    }

    private static List<String> first(ConcurrentLinkedQueue<String> q) {
        List<String> out = new ArrayList<>();
        for (String s : q) {
            if (out.size() == 3) {
                break;
            }
            out.add(s);
        }
        return out;
    }
}
