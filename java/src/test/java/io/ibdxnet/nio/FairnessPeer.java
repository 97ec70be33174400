package io.ibdxnet.nio;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.NetworkException;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.util.concurrent.locks.LockSupport;
import java.util.Map;

/**
 * A node in its own process for the fairness tests.
 * {@code server ID LISTEN NODES...}: answers BytesRequests with their bytes;
 * prints {@code READY}, then on {@code quit} from stdin one {@code STATS} line
 * (replies failed, handler errors, peak heap after GC, healthy) and exits.
 * {@code flood ID LISTEN NODES... -- DEST SECONDS PAUSE_US}: sends requests
 * of 1 KiB to DEST for SECONDS without waiting for answers, pausing PAUSE_US
 * between them (0: none; a pause makes each arrive on its own, one handler
 * batch each at the receiver), prints {@code FLOODED n}, then idles. It never
 * reads the replies: the first one blocks its receive path for good (with
 * {@code receiveInline} off the coordinator completes it; with two incoming
 * buffers at most, its selector then stops reading the connection).
 * {@code honest FIRST COUNT HOST BASEPORT SERVER}: COUNT nodes with ids
 * FIRST… listening on HOST:BASEPORT+i, node 0 at SERVER (host:port); prints
 * {@code READY}; each {@code measure MS} line runs request/response from every
 * node to node 0 for MS (1 ms apart per node) and prints one {@code MEASURED}
 * line (round trips in µs: p50, p99, count; failures; replies more than
 * 20 ms on their way back); {@code quit} ends it.
 * NODES are {@code id=host:port}.
 */
public final class FairnessPeer {
    private FairnessPeer() {}

    public static void main(String[] args) throws Exception {
        if (args[0].equals("honest")) {
            honest(Integer.parseInt(args[1]), Integer.parseInt(args[2]), args[3], Integer.parseInt(args[4]), args[5]);
            return;
        }
        DXNetConfig c = new DXNetConfig(Integer.parseInt(args[1]));
        c.transport = "nio";
        c.listen = args[2];
        if (args[0].equals("flood")) {
            c.receiveInline = false;
            c.ibqMaxBuffers = 2;
            c.ibqMaxBuffersPerSource = 2;
        }
        int i = 3;
        for (; i < args.length && !args[i].equals("--"); i++) {
            String[] kv = args[i].split("=", 2);
            c.nodes.put(Integer.parseInt(kv[0]), kv[1]);
        }
        try (DXNet node = DXNet.start(c)) {
            node.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
            if (args[0].equals("server")) {
                serve(node);
            } else {
                flood(node, Integer.parseInt(args[i + 1]), Integer.parseInt(args[i + 2]), Integer.parseInt(args[i + 3]));
            }
        }
    }

    private static void serve(DXNet node) throws Exception {
        java.util.concurrent.atomic.AtomicLong slowIn = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicLong maxIn = new java.util.concurrent.atomic.AtomicLong();
        node.register(BytesRequest.class, r -> {
            if (r.getSource() != 1 && r.bytes.length >= 8) {
                long in = System.nanoTime() - java.nio.ByteBuffer.wrap(r.bytes).getLong();
                maxIn.accumulateAndGet(in, Math::max);
                if (in > 20_000_000) {
                    slowIn.incrementAndGet();
                }
                java.nio.ByteBuffer.wrap(r.bytes).putLong(System.nanoTime());
            }
            node.reply(r, BytesResponse.echo(r));
        });
        System.out.println("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        while (!"quit".equals(in.readLine())) {
            // wait
        }
        Map<String, Long> s = node.transportStats();
        // What the backlog holds: live heap after a full collection, while the
        // peer's requests still wait here.
        System.gc();
        long live = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
        System.out.println("INWAY requests over 20 ms to their handler: " + slowIn + ", at most " + maxIn.get() / 1000 + " µs");
        System.out.println("STATS replies_failed=" + s.get("replies_failed") + " handler_errors=" + s.get("handler_errors")
                + " handler_bytes_queued=" + node.handlerBytesQueued() + " incoming_bytes_queued=" + node.incomingBytesQueued()
                + " live_heap=" + live + " max_heap=" + Runtime.getRuntime().maxMemory() + " healthy=" + node.healthy());
        System.out.flush();
    }

    private static void flood(DXNet node, int dest, int seconds, int pauseMicros) throws Exception {
        byte[] payload = new byte[1024];
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        long sent = 0;
        long failed = 0;
        String firstFailure = "";
        node.sendAsync(new BytesRequest(dest, payload), 600_000).thenRun(() -> {
            LockSupport.parkNanos(Long.MAX_VALUE); // the receive path stops here: nothing more is read
        });
        while (System.nanoTime() < end) {
            try {
                node.sendAsync(new BytesRequest(dest, payload), 600_000);
                sent++;
                if (pauseMicros > 0) {
                    LockSupport.parkNanos(pauseMicros * 1_000L);
                }
            } catch (NetworkException e) {
                if (failed++ == 0) {
                    firstFailure = e.toString();
                }
            }
        }
        System.out.println("FLOODED " + sent + " failed " + failed + " " + firstFailure);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    private static void honest(int first, int count, String host, int basePort, String server) throws Exception {
        java.util.List<DXNet> nodes = new java.util.ArrayList<>();
        try {
            for (int i = 0; i < count; i++) {
                DXNetConfig c = new DXNetConfig(first + i);
                c.transport = "nio";
                c.listen = host + ":" + (basePort + i);
                c.nodes.put(0, server);
                DXNet n = DXNet.start(c);
                n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
                nodes.add(n);
            }
            System.out.println("READY");
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
            String line;
            while ((line = in.readLine()) != null && !line.equals("quit")) {
                if (line.startsWith("measure ")) {
                    System.out.println(measure(nodes, Long.parseLong(line.substring(8))));
                }
            }
        } finally {
            for (DXNet n : nodes) {
                n.close();
            }
        }
    }

    /** Request/response of every node to node 0 for {@code ms}, 1 ms apart per node. */
    private static String measure(java.util.List<DXNet> nodes, long ms) throws InterruptedException {
        java.util.List<Long> rtts = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
        java.util.concurrent.atomic.AtomicInteger failures = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicInteger slowBack = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.List<Thread> threads = new java.util.ArrayList<>();
        for (DXNet n : nodes) {
            Thread t = new Thread(() -> {
                byte[] payload = new byte[64];
                while (!stop.get()) {
                    long t0 = System.nanoTime();
                    java.nio.ByteBuffer.wrap(payload).putLong(t0); // the server notes how long it took to reach it
                    try {
                        BytesResponse r = n.sendSync(new BytesRequest(0, payload), 10_000);
                        if (System.nanoTime() - java.nio.ByteBuffer.wrap(r.bytes).getLong() > 20_000_000) {
                            slowBack.incrementAndGet();
                        }
                        rtts.add(System.nanoTime() - t0);
                    } catch (NetworkException e) {
                        failures.incrementAndGet();
                    }
                    LockSupport.parkNanos(1_000_000);
                }
            });
            t.start();
            threads.add(t);
        }
        Thread.sleep(ms);
        stop.set(true);
        for (Thread t : threads) {
            t.join(15_000);
        }
        java.util.List<Long> sorted = new java.util.ArrayList<>(rtts);
        java.util.Collections.sort(sorted);
        long p50 = sorted.isEmpty() ? -1 : sorted.get(sorted.size() / 2) / 1000;
        long p99 = sorted.isEmpty() ? -1 : sorted.get(Math.min(sorted.size() - 1, (int) (sorted.size() * 0.99))) / 1000;
        return "MEASURED p50=" + p50 + " p99=" + p99 + " count=" + sorted.size() + " failures=" + failures + " slow_back="
                + slowBack;
    }
}
