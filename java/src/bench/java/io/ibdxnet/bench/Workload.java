package io.ibdxnet.bench;

import io.ibdxnet.DXNet;
import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;

/**
 * DXNet-style end-to-end workloads (paper §9.1–§9.2): {@code uni} (node 0 →
 * node 1), {@code bi} (both ways), {@code all} (all-to-all among
 * {@code --nodes}), {@code rtt} (requests from node 0 to node 1, every round
 * trip recorded; {@code --gap-us}: a pause after each), all nodes in this JVM; or {@code --processes N}: one node
 * per process ({@link Processes}), {@code uni}, {@code bi} and {@code rtt}
 * with N = 2, {@code all} with N nodes. Prints one {@code RESULT key=value
 * ...} line ({@link Results}): with several processes the CPU time and the
 * peak resident set are those of all of them; progress goes to stderr on
 * long runs. {@code --pattern
 * idle} measures connected nodes without traffic instead ({@link IdleCost}).
 * The engine gets {@code fabric} and the {@code --native} settings, nothing
 * else: every other key has its default.
 *
 * <pre>--transport ib|nio|loopback|none --fabric sim|auto|verbs --pattern uni|bi|all|rtt|idle --nodes N
 * --size BYTES --messages PER_SENDER_THREAD --threads SENDERS_PER_NODE --handlers H
 * --orderPerSender true|false --receiveInline true|false (default true each, as DXNetConfig)
 * --native KEY=VALUE (engine settings, repeatable) --processes N
 * --seconds S --settle-ms MS (idle: measured time, 10 s; wait before it, 2000 ms)</pre>
 */
public final class Workload {
    private Workload() {}

    public static void main(String[] args) throws Exception {
        WorkloadOptions o = WorkloadOptions.parse(args);
        Results.Row row = o.row;
        if (o.role.equals("child")) {
            Processes.child(o);
            return;
        }
        if (row.pattern.equals("idle")) {
            IdleCost.run(o);
            return;
        }
        Processes procs = null;
        AtomicLongArray fromHere = null;
        List<DXNet> nodes;
        long t0 = System.nanoTime();
        if (row.processes > 1) {
            AtomicLongArray from = new AtomicLongArray(row.nodes);
            fromHere = from;
            procs = Processes.start(o, args, m -> {
                from.incrementAndGet(m.getSource());
                RECEIVED.incrementAndGet();
            });
            nodes = List.of(procs.local());
            if (row.pattern.equals("all")) {
                // The full mesh: every node sends one byte to every other, as mesh() does.
                Results.Row mesh = row.copy();
                mesh.senders = 1;
                mesh.messages = row.nodes - 1;
                mesh.size = 1;
                run(nodes, procs, mesh, false);
                row.meshMs = (System.nanoTime() - t0) / 1_000_000;
            }
        } else {
            nodes = start(o);
            if (row.pattern.equals("all")) {
                row.meshMs = mesh(nodes, t0);
            }
        }
        try {
            // Warm-up (JIT, connections, buffers), then the measured run.
            Results.Row warm = row.copy();
            warm.messages = Math.max(1, Math.min(row.messages / 10, 20_000));
            if (row.pattern.equals("rtt") && row.gapUs == 0) {
                // A round trip calls each method once: a tenth of 20 000 leaves
                // the path half compiled (p50 17-22 µs against 8-12 warm on sim).
                warm.messages = Math.min(row.messages, 20_000);
            }
            run(nodes, procs, warm, false);
            java.util.Map<String, Long> before = engineCounters(nodes);
            run(nodes, procs, row, true);
            row.bytesPerConnection = bytesPerConnection(o, nodes.get(0));
            if (row.impl.equals("ib")) {
                engineMemory(nodes);
            }
            if (!row.impl.equals("loopback")) {
                printEngineCounters(before, engineCounters(nodes));
            }
            long rss = Results.peakRssBytes();
            Processes.Usage children = procs == null ? new Processes.Usage(0, 0, 0) : procs.childUsage();
            row.peakRssBytes = rss < 0 || children.peakRssBytes() < 0 ? -1 : rss + children.peakRssBytes();
            row.heapCommittedBytes = Results.heapCommittedBytes() + children.heapCommittedBytes();
        } finally {
            if (procs != null) {
                procs.close();
                System.err.println(Processes.receivedLine(0, fromHere));
            } else {
                for (DXNet n : nodes) {
                    n.close();
                }
            }
        }
        System.out.println(row.line());
    }

    /** The engine counters {@link #printEngineCounters} shows. */
    private static final List<String> ENGINE_COUNTERS = List.of("wrs_sent", "messages_received", "send_iterations",
            "send_sleeps", "send_caller_runs", "send_caller_left", "recv_iterations", "recv_sleeps", "recv_caller_runs",
            "writes_by_sender");

    /** {@link #ENGINE_COUNTERS} summed over the nodes of this JVM (0 for a transport without them). */
    private static java.util.Map<String, Long> engineCounters(List<DXNet> nodes) {
        java.util.Map<String, Long> sum = new java.util.LinkedHashMap<>();
        for (DXNet n : nodes) {
            java.util.Map<String, Long> stats = n.transportStats();
            for (String k : ENGINE_COUNTERS) {
                sum.merge(k, stats.getOrDefault(k, 0L), Long::sum);
            }
        }
        return sum;
    }

    /**
     * The engines' counters over the measured run (stderr): how many posts,
     * receives, iterations and sleeps it took (ib); how many writes senders
     * made themselves (nio). Of the nodes in this JVM only.
     */
    private static void printEngineCounters(java.util.Map<String, Long> before, java.util.Map<String, Long> after) {
        StringBuilder b = new StringBuilder("engine counters over the measured run (sums over the nodes of this JVM):");
        for (String k : ENGINE_COUNTERS) {
            b.append(' ').append(k).append('=').append(after.get(k) - before.get(k));
        }
        System.err.println(b);
    }

    /**
     * Where the engines' memory is (stderr): their receive pools
     * ({@code recv_pool_bytes}, registered) and {@code bytes_per_node}
     * (pool, rings, queues), summed over the nodes of this JVM, MiB.
     */
    private static void engineMemory(List<DXNet> nodes) {
        long pool = 0;
        long total = 0;
        for (DXNet n : nodes) {
            java.util.Map<String, Long> s = n.transportStats();
            pool += s.getOrDefault("recv_pool_bytes", 0L);
            total += s.getOrDefault("bytes_per_node", 0L);
        }
        System.err.printf("engine memory: recv_pool_mb=%.1f bytes_per_node_mb=%.1f (sums over %d nodes)%n",
                pool / (double) (1 << 20), total / (double) (1 << 20), nodes.size());
    }

    /**
     * Memory of one connection endpoint: ib the engine's {@code bytes_per_connection}
     * (the registered send ring; mapped, resident only where written), nio and
     * loopback the outgoing rings' resident bytes at the end of the run
     * ({@code ring_bytes_resident}) per open outgoing connection: the whole
     * {@code nioRingSize} in direct memory (JDK 17–21), the pages written and
     * not yet given back in a mapped ring (JDK 22+) — the per-connection
     * buffers besides it (a few hundred bytes, the socket's kernel buffers)
     * are not counted. {@code nioRingSize} if the transport does not tell.
     */
    private static long bytesPerConnection(WorkloadOptions o, DXNet node) {
        java.util.Map<String, Long> s = node.transportStats();
        if (o.row.impl.equals("ib")) {
            Long v = s.get("bytes_per_connection");
            return v == null ? -1 : v;
        }
        Long resident = s.get("ring_bytes_resident");
        Long open = s.get("connections");
        if (resident == null || open == null || open <= 0) {
            return o.ringSize();
        }
        return resident / open;
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
        awaitReceived((long) nodes.size() * (nodes.size() - 1), t0, null);
        long done = System.nanoTime();
        // Where the mesh time went (stderr): starting the nodes, the senders'
        // sends (each connects first), the last deliveries.
        System.err.printf("mesh breakdown: start_ms=%d sends_ms=%d delivery_ms=%d%n", (started - t0) / 1_000_000,
                (sent - started) / 1_000_000, (done - sent) / 1_000_000);
        return (done - t0) / 1_000_000;
    }

    /** Whether node {@code node} sends in {@code row}'s pattern: node 0 alone for uni and rtt, every node for bi and all (all with {@code --active K}: the first K). */
    static boolean sends(Results.Row row, int node) {
        return node == 0 || !row.pattern.matches("uni|rtt") && (row.active == 0 || node < row.active);
    }

    /** The nodes {@code from} sends to in turn: the next {@code targets} nodes by id (all: every other, else one). */
    private static int targets(Results.Row row) {
        if (!row.pattern.equals("all")) {
            return 1;
        }
        return row.fanout > 0 ? Math.min(row.fanout, row.nodes - 1) : row.nodes - 1;
    }

    /**
     * The data messages node {@code node} receives in {@code row}: each
     * sender thread's message {@code i} goes to node {@code (self + 1 + i %
     * targets) % nodes} (rtt: requests, not counted here).
     */
    static long expectedAt(Results.Row row, int node) {
        if (row.pattern.equals("rtt")) {
            return 0;
        }
        int targets = targets(row);
        long sum = 0;
        for (int s = 0; s < row.nodes; s++) {
            int k = Math.floorMod(node - s - 1, row.nodes); // i % targets == k reaches this node
            if (s == node || !sends(row, s) || k >= targets) {
                continue;
            }
            sum += row.senders * (row.messages / targets + (k < row.messages % targets ? 1 : 0));
        }
        return sum;
    }

    /**
     * Starts {@code row.senders} threads sending node {@code from}'s share of
     * {@code row} ({@code rtts}: where rtt's round trips go; null when not rtt);
     * the first failure goes to {@code failure}.
     */
    static List<Thread> startSenders(DXNet from, Results.Row row, Histogram rtts, AtomicReference<Throwable> failure) {
        boolean rtt = row.pattern.equals("rtt");
        int targets = targets(row);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < row.senders; t++) {
            Histogram mine = rtt ? new Histogram(3_600_000_000_000L, 3) : null;
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
                            if (row.gapUs > 0) {
                                java.util.concurrent.locks.LockSupport.parkNanos(row.gapUs * 1000);
                            }
                        } else {
                            from.sendMessage(new BytesMessage(dest, payload));
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
                if (rtt) {
                    synchronized (rtts) {
                        rtts.add(mine);
                    }
                }
            }, "bench-sender-" + from.nodeId() + "-" + t);
            threads.add(th);
            th.start();
        }
        return threads;
    }

    /**
     * Runs {@code row}'s workload; if {@code record}, fills in its
     * measurements. With {@code procs} (nodes 1 … N-1 in other processes)
     * the CPU time is that of every process, and the run ends when every
     * process's node had its data messages.
     */
    private static void run(List<DXNet> nodes, Processes procs, Results.Row row, boolean record) throws Exception {
        RECEIVED.set(0);
        boolean rtt = row.pattern.equals("rtt");
        // Data messages (rtt: round trips) of the whole run, and those of the nodes in this JVM.
        long total = 0;
        long here = 0;
        for (int id = 0; id < row.nodes; id++) {
            total += sends(row, id) ? row.senders * row.messages : 0;
            here += procs == null || id == 0 ? expectedAt(row, id) : 0;
        }
        Histogram rtts = rtt ? new Histogram(3_600_000_000_000L, 3) : null;
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long remoteCpu0 = procs == null ? 0 : procs.childUsage().cpuNanos();
        long cpu0 = Results.processCpuNanos();
        long t0 = System.nanoTime();
        if (procs != null) {
            procs.begin(row);
        }
        List<Thread> threads = new ArrayList<>();
        for (DXNet from : nodes) {
            if (sends(row, from.nodeId())) {
                threads.addAll(startSenders(from, row, rtts, failure));
            }
        }
        for (Thread th : threads) {
            th.join();
        }
        if (failure.get() != null) {
            throw new IllegalStateException("a sender failed", failure.get());
        }
        awaitReceived(here, t0, procs);
        if (procs != null) {
            procs.awaitAll();
        }
        long nanos = System.nanoTime() - t0;
        long cpu = Results.processCpuNanos() - cpu0;
        if (procs != null) {
            cpu += procs.childUsage().cpuNanos() - remoteCpu0;
        }
        if (record) {
            row.measured(total, nanos, cpu, rtts);
        }
    }

    /** Waits until the nodes of this JVM received {@code expected} data messages; fails when one of {@code procs} ended. */
    private static void awaitReceived(long expected, long t0, Processes procs) throws InterruptedException {
        long lastReport = t0;
        while (RECEIVED.get() < expected) {
            if (procs != null) {
                procs.checkAlive();
            }
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
