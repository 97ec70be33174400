package io.ibdxnet.bench;

import io.ibdxnet.DXNet;
import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;

/**
 * DXNet-style end-to-end workloads (paper §9.1–§9.2): {@code uni} (node 0 →
 * node 1), {@code bi} (both ways), {@code all} (all-to-all among
 * {@code --nodes}), {@code rtt} (requests from node 0 to node 1, every round
 * trip recorded), all nodes in this JVM; or {@code --processes 2}: {@code
 * uni} and {@code rtt} with node 1 in a process of its own
 * ({@link TwoProcesses}). Prints one {@code RESULT key=value ...} line
 * ({@link Results}); progress goes to stderr on long runs. {@code --pattern
 * idle} measures connected nodes without traffic instead ({@link IdleCost}).
 * The engine gets {@code fabric} and the {@code --native} settings, nothing
 * else: every other key has its default.
 *
 * <pre>--transport ib|nio|loopback|none --fabric sim|auto|verbs --pattern uni|bi|all|rtt|idle --nodes N
 * --size BYTES --messages PER_SENDER_THREAD --threads SENDERS_PER_NODE --handlers H
 * --orderPerSender true|false --receiveInline true|false (default true each, as DXNetConfig)
 * --native KEY=VALUE (engine settings, repeatable) --processes 1|2
 * --seconds S --settle-ms MS (idle: measured time, 10 s; wait before it, 2000 ms)</pre>
 */
public final class Workload {
    private Workload() {}

    public static void main(String[] args) throws Exception {
        WorkloadOptions o = WorkloadOptions.parse(args);
        Results.Row row = o.row;
        if (o.role.equals("receiver")) {
            TwoProcesses.receive(o);
            return;
        }
        if (row.pattern.equals("idle")) {
            IdleCost.run(o);
            return;
        }
        TwoProcesses two = null;
        List<DXNet> nodes;
        if (row.processes == 2) {
            two = TwoProcesses.start(o, args);
            nodes = List.of(two.local());
        } else {
            long t0 = System.nanoTime();
            nodes = start(o);
            if (row.pattern.equals("all")) {
                row.meshMs = mesh(nodes, t0);
            }
        }
        try {
            // Warm-up (JIT, connections, buffers), then the measured run.
            Results.Row warm = row.copy();
            warm.messages = Math.max(1, Math.min(row.messages / 10, 20_000));
            run(nodes, two, warm, false);
            run(nodes, two, row, true);
        } finally {
            if (two != null) {
                two.close();
            } else {
                for (DXNet n : nodes) {
                    n.close();
                }
            }
        }
        System.out.println(row.line());
    }

    private static final AtomicLong RECEIVED = new AtomicLong();

    private static List<DXNet> start(WorkloadOptions o) throws Exception {
        List<DXNet> nodes = new ArrayList<>();
        long[] startMs = new long[o.row.nodes];
        for (int id = 0; id < o.row.nodes; id++) {
            long t = System.nanoTime();
            nodes.add(o.startNode(id, "127.0.0.1:0", m -> RECEIVED.incrementAndGet()));
            startMs[id] = (System.nanoTime() - t) / 1_000_000;
        }
        if (o.row.nodes > 2) {
            System.err.println("node start ms: " + java.util.Arrays.toString(startMs));
        }
        for (DXNet a : nodes) {
            for (DXNet b : nodes) {
                if (a != b) {
                    a.addNode(b.nodeId(), "127.0.0.1:" + b.localPort());
                }
            }
        }
        return nodes;
    }

    /**
     * Every node sends one byte to every other (a thread per node), until all
     * arrived: the full mesh of connections is up. Returns the milliseconds
     * since {@code t0} (before the nodes were started).
     */
    private static long mesh(List<DXNet> nodes, long t0) throws Exception {
        RECEIVED.set(0);
        long started = System.nanoTime();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (DXNet from : nodes) {
            Thread th = new Thread(() -> {
                try {
                    for (DXNet to : nodes) {
                        if (to != from) {
                            from.sendMessage(new BytesMessage(to.nodeId(), new byte[1]));
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "bench-mesh-" + from.nodeId());
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join();
        }
        if (failure.get() != null) {
            throw new IllegalStateException("a mesh sender failed", failure.get());
        }
        long sent = System.nanoTime();
        awaitReceived((long) nodes.size() * (nodes.size() - 1), t0);
        long done = System.nanoTime();
        // Where the mesh time went (stderr): starting the nodes, the senders'
        // sends (each connects first), the last deliveries.
        System.err.printf("mesh breakdown: start_ms=%d sends_ms=%d delivery_ms=%d%n", (started - t0) / 1_000_000,
                (sent - started) / 1_000_000, (done - sent) / 1_000_000);
        return (done - t0) / 1_000_000;
    }

    /**
     * Runs {@code row}'s workload; if {@code record}, fills in its
     * measurements. With {@code two} (node 1 in another process) the CPU time
     * is both processes'.
     */
    private static void run(List<DXNet> nodes, TwoProcesses two, Results.Row row, boolean record) throws Exception {
        RECEIVED.set(0);
        List<DXNet> senders = new ArrayList<>();
        switch (row.pattern) {
            case "uni":
            case "rtt":
                senders.add(nodes.get(0));
                break;
            default:
                senders.addAll(nodes);
        }
        int targets = row.pattern.equals("all") ? row.nodes - 1 : 1;
        long expected = senders.size() * (long) row.senders * row.messages;
        boolean rtt = row.pattern.equals("rtt");
        long remoteCpu0 = two == null ? 0 : two.begin(rtt ? 0 : expected);
        Histogram rtts = new Histogram(3_600_000_000_000L, 3);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        long cpu0 = Results.processCpuNanos();
        long t0 = System.nanoTime();
        for (DXNet from : senders) {
            for (int t = 0; t < row.senders; t++) {
                Histogram mine = new Histogram(3_600_000_000_000L, 3);
                Thread th = new Thread(() -> {
                    byte[] payload = new byte[row.size];
                    int self = from.nodeId();
                    try {
                        for (long i = 0; i < row.messages; i++) {
                            int dest = (int) ((self + 1 + i % targets) % row.nodes);
                            if (rtt) {
                                long s = System.nanoTime();
                                from.sendSync(new BytesRequest(1, payload), 60_000);
                                mine.recordValue(System.nanoTime() - s);
                            } else {
                                from.sendMessage(new BytesMessage(dest, payload));
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                    synchronized (rtts) {
                        rtts.add(mine);
                    }
                }, "bench-sender-" + from.nodeId() + "-" + t);
                threads.add(th);
                th.start();
            }
        }
        for (Thread th : threads) {
            th.join();
        }
        if (failure.get() != null) {
            throw new IllegalStateException("a sender failed", failure.get());
        }
        if (!rtt && two == null) {
            awaitReceived(expected, t0);
        } else if (!rtt) {
            two.awaitAll();
        }
        long nanos = System.nanoTime() - t0;
        long cpu = Results.processCpuNanos() - cpu0;
        if (two != null) {
            cpu += two.receiverCpuNanos() - remoteCpu0;
        }
        if (record) {
            row.measured(expected, nanos, cpu, rtt ? rtts : null);
        }
    }

    private static void awaitReceived(long expected, long t0) throws InterruptedException {
        long lastReport = t0;
        while (RECEIVED.get() < expected) {
            long now = System.nanoTime();
            if (now - t0 > 600_000_000_000L) {
                throw new IllegalStateException("only " + RECEIVED.get() + " of " + expected + " messages arrived in 600 s");
            }
            if (now - lastReport > 2_000_000_000L) {
                System.err.printf("progress: %d / %d messages%n", RECEIVED.get(), expected);
                lastReport = now;
            }
            Thread.sleep(0, 200_000);
        }
    }
}
