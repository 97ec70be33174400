package io.ibdxnet.bench;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;

/**
 * DXNet-style end-to-end workloads (paper §9.1–§9.2) with all nodes in this
 * JVM: {@code uni} (node 0 → node 1), {@code bi} (both ways), {@code all}
 * (all-to-all among {@code --nodes}), {@code rtt} (requests from node 0 to
 * node 1, every round trip recorded). Prints one {@code RESULT key=value ...}
 * line ({@link Results}); progress goes to stderr on long runs.
 *
 * <pre>--transport ib|nio|loopback --fabric sim|auto|verbs --pattern uni|bi|all|rtt --nodes N
 * --size BYTES --messages PER_SENDER_THREAD --threads SENDERS_PER_NODE --handlers H
 * --orderPerSender true|false (default true, as DXNetConfig)
 * --native KEY=VALUE (engine settings, repeatable)</pre>
 */
public final class Workload {
    /** The answer to a request carries no bytes. */
    private static final byte[] NO_BYTES = new byte[0];

    private Workload() {}

    public static void main(String[] args) throws Exception {
        Results.Row row = new Results.Row();
        String fabric = "sim";
        boolean orderPerSender = true;
        java.util.Map<String, String> nativeExtra = new java.util.LinkedHashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (i + 1 >= args.length) {
                usage("option " + args[i] + " needs a value");
            }
            String v = args[i + 1];
            switch (args[i]) {
                case "--transport": row.impl = v; break;
                case "--fabric": fabric = v; break;
                case "--pattern": row.pattern = v; break;
                case "--nodes": row.nodes = Integer.parseInt(v); break;
                case "--size": row.size = Integer.parseInt(v); break;
                case "--messages": row.messages = Long.parseLong(v); break;
                case "--threads": row.senders = Integer.parseInt(v); break;
                case "--handlers": row.handlers = Integer.parseInt(v); break;
                case "--orderPerSender": orderPerSender = Boolean.parseBoolean(v); break;
                case "--native": {
                    int eq = v.indexOf('=');
                    if (eq < 1) {
                        usage("--native needs key=value");
                    }
                    nativeExtra.put(v.substring(0, eq), v.substring(eq + 1));
                    break;
                }
                default: usage("unknown option " + args[i]);
            }
        }
        if (!row.pattern.matches("uni|bi|all|rtt") || row.nodes < 2 || row.size < 0 || row.messages < 1 || row.senders < 1) {
            usage("bad pattern, nodes, size, messages or threads");
        }
        if (!row.pattern.equals("all")) {
            row.nodes = 2;
        }
        List<DXNet> nodes = start(row, fabric, nativeExtra, orderPerSender);
        try {
            // Warm-up (JIT, connections, buffers), then the measured run.
            Results.Row warm = row.copy();
            warm.messages = Math.max(1, Math.min(row.messages / 10, 20_000));
            run(nodes, warm, false);
            run(nodes, row, true);
        } finally {
            for (DXNet n : nodes) {
                n.close();
            }
        }
        System.out.println(row.line());
    }

    private static void usage(String problem) {
        System.err.println("workload: " + problem);
        System.err.println("options: --transport ib|nio|loopback --fabric sim|auto|verbs --pattern uni|bi|all|rtt --nodes N"
                + " --size BYTES --messages PER_SENDER_THREAD --threads SENDERS --handlers H --orderPerSender true|false"
                + " --native KEY=VALUE");
        System.exit(2);
    }

    private static final AtomicLong RECEIVED = new AtomicLong();

    private static List<DXNet> start(Results.Row row, String fabric, java.util.Map<String, String> nativeExtra,
            boolean orderPerSender) throws Exception {
        List<DXNet> nodes = new ArrayList<>();
        for (int id = 0; id < row.nodes; id++) {
            DXNetConfig c = new DXNetConfig(id);
            c.transport = row.impl;
            c.listen = "127.0.0.1:0";
            c.handlerThreads = row.handlers;
            c.orderPerSender = orderPerSender;
            c.requestTimeoutMs = 60_000;
            c.sendTimeoutMs = 60_000;
            c.nativeConfig.put("fabric", fabric);
            // Nodes share this machine's cores: idle engine threads yield at once.
            c.nativeConfig.put("parking_yield_after_ms", "0");
            c.nativeConfig.putAll(nativeExtra);
            DXNet n = DXNet.start(c);
            n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
            n.register(BytesMessage.class, p -> RECEIVED.incrementAndGet());
            n.register(BytesRequest.class, ask -> n.reply(ask, new BytesResponse(ask, NO_BYTES)));
            nodes.add(n);
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

    /** Runs {@code row}'s workload; if {@code record}, fills in its measurements. */
    private static void run(List<DXNet> nodes, Results.Row row, boolean record) throws Exception {
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
                            if (row.pattern.equals("rtt")) {
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
        if (!row.pattern.equals("rtt")) {
            awaitReceived(expected, t0);
        }
        long nanos = System.nanoTime() - t0;
        long cpu = Results.processCpuNanos() - cpu0;
        if (record) {
            row.measured(expected, nanos, cpu, row.pattern.equals("rtt") ? rtts : null);
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
