package io.ibdxnet.app;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.NetworkException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * The main job: two nodes exchange messages over the InfiniBand transport
 * (on {@code sim} without an RDMA device), or NIO or loopback, and print a
 * report: message rate and throughput from several sender threads, then
 * request round trip times. Both nodes run in this JVM ({@code --role both}),
 * or each in its own process ({@code --role receiver} and {@code --role
 * sender} with {@code --node0}/{@code --node1} addresses). Options: see
 * {@link #usage}.
 */
public final class DemoMain {
    private DemoMain() {}

    /** Runs the demo; see {@link #usage} for the options. Exits 1 on any failure. */
    public static void main(String[] args) {
        try {
            run(args);
        } catch (Exception e) {
            // Nodes' threads would keep the JVM alive: a failed demo exits non-zero at once.
            System.err.println("demo failed: " + e);
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static void run(String[] args) throws Exception {
        int messages = 200_000;
        int size = 64;
        int threads = 2;
        int requests = 20_000;
        String fabric = "auto";
        String transport = "ib";
        String role = "both";
        String[] addresses = {"127.0.0.1:0", "127.0.0.1:0"};
        int timeoutMs = 10_000;
        boolean allCounters = false;
        for (int i = 0; i < args.length; i += 2) {
            if (args[i].equals("--counters")) { // the one option without a value
                allCounters = true;
                i--;
                continue;
            }
            if (i + 1 >= args.length) {
                usage("option " + args[i] + " needs a value");
            }
            String v = args[i + 1];
            switch (args[i]) {
                case "--messages": messages = Integer.parseInt(v); break;
                case "--size": size = Integer.parseInt(v); break;
                case "--threads": threads = Integer.parseInt(v); break;
                case "--requests": requests = Integer.parseInt(v); break;
                case "--fabric": fabric = v; break;
                case "--transport": transport = v; break;
                case "--role": role = v; break;
                case "--node0": addresses[0] = v; break;
                case "--node1": addresses[1] = v; break;
                case "--timeout-ms": timeoutMs = Integer.parseInt(v); break;
                default: usage("unknown option " + args[i]);
            }
        }
        if (!role.equals("both") && !role.equals("sender") && !role.equals("receiver")) {
            usage("--role must be both, sender or receiver");
        }
        if (!role.equals("both") && (addresses[0].endsWith(":0") || addresses[1].endsWith(":0"))) {
            usage("two processes need fixed addresses: --node0 host:port --node1 host:port");
        }
        List<DXNet> nodes = new ArrayList<>();
        for (int id = 0; id < 2; id++) {
            if (role.equals("sender") && id == 1 || role.equals("receiver") && id == 0) {
                continue;
            }
            nodes.add(startNode(id, transport, fabric, addresses[id], timeoutMs));
        }
        if (role.equals("both")) {
            nodes.get(0).addNode(1, "127.0.0.1:" + nodes.get(1).localPort());
            nodes.get(1).addNode(0, "127.0.0.1:" + nodes.get(0).localPort());
        } else {
            nodes.get(0).addNode(1 - nodes.get(0).nodeId(), addresses[1 - nodes.get(0).nodeId()]);
        }
        if (!role.equals("sender")) {
            DXNet b = nodes.get(nodes.size() - 1);
            CountDownLatch quit = serve(b);
            if (role.equals("receiver")) {
                System.out.printf("ibdxnet demo receiver: node 1 on %s (%s transport, %s), waiting for node 0%n",
                        addresses[1], transport, b.fabricName());
                quit.await();
                Thread.sleep(200); // the last answer leaves before the node closes
                b.close();
                System.out.println("receiver: done, " + DATA_HANDLED.get() + " data messages handled");
                return;
            }
        }
        DXNet a = nodes.get(0);
        System.out.printf("ibdxnet demo: %s, %s transport on %s (fabric=%s)%n",
                role.equals("both") ? "2 nodes in one JVM" : "node 0 of 2 processes", transport, a.fabricName(), fabric);
        // Warm-up, then the measured run. A request after the messages returns
        // once the receiver has handled them all (one sender's messages are
        // handled in order by default).
        sendAll(a, 2_000, size, threads);
        a.sendSync(ping(), 120_000);
        long t0 = System.nanoTime();
        sendAll(a, messages, size, threads);
        a.sendSync(ping(), 120_000);
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.printf("messages: %d x %d B from %d threads in %.3f s: %.0f msg/s, %.1f MB/s payload%n",
                messages, size, threads, secs, messages / secs, (double) messages * size / secs / 1e6);
        for (int i = 0; i < 1000; i++) {
            a.sendSync(ping(), timeoutMs);
        }
        long[] rtt = new long[requests];
        for (int i = 0; i < requests; i++) {
            long s = System.nanoTime();
            a.sendSync(ping(), timeoutMs);
            rtt[i] = System.nanoTime() - s;
        }
        Arrays.sort(rtt);
        System.out.printf("request/response: %d round trips, RTT us: p50 %.1f  p95 %.1f  p99 %.1f  p99.9 %.1f  max %.1f%n",
                requests, rtt[requests / 2] / 1e3, rtt[(int) (requests * 0.95)] / 1e3, rtt[(int) (requests * 0.99)] / 1e3,
                rtt[(int) (requests * 0.999)] / 1e3, rtt[requests - 1] / 1e3);
        Map<String, Long> counters = a.transportStats();
        if (allCounters) {
            System.out.println("transport counters node 0: " + counters);
        } else {
            StringBuilder line = new StringBuilder("errors node 0:");
            for (String k : SUMMARY_COUNTERS) {
                if (counters.containsKey(k)) { // a transport keeps the ones that apply to it
                    line.append(' ').append(k).append(' ').append(counters.get(k));
                }
            }
            System.out.println(line.append("  (--counters prints all ").append(counters.size()).append(')'));
        }
        if (!role.equals("both")) {
            a.sendSync(new BytesRequest(1, new byte[0]), timeoutMs);
        }
        long dropped = 0;
        for (DXNet n : nodes) {
            dropped += n.droppedMessages();
            n.close();
        }
        System.out.println("dropped messages: " + dropped);
    }

    /** The counters of the short report: any of them above 0 means something went wrong. */
    private static final String[] SUMMARY_COUNTERS = {"errors", "thread_panics", "protocol_violations"};

    /** A ping to node 1: 8 bytes (a timestamp's size); an empty one asks a receiver process to quit. */
    private static BytesRequest ping() {
        return new BytesRequest(1, new byte[8]);
    }

    /** A ping that asks a receiver process to quit after answering (it answers every message before it: order). */
    public static BytesRequest quitPing(int node) {
        return new BytesRequest(node, new byte[0]);
    }

    /** Data messages the receiving node handled (printed when a receiver process quits). */
    private static final java.util.concurrent.atomic.AtomicLong DATA_HANDLED = new java.util.concurrent.atomic.AtomicLong();

    private static void usage(String problem) {
        System.err.println("demo: " + problem);
        System.err.println("options: --messages N --size BYTES --threads T --requests R --transport ib|nio|loopback"
                + " --fabric auto|sim|simhost|verbs --role both|sender|receiver --node0 HOST:PORT --node1 HOST:PORT"
                + " --timeout-ms MS (send and request timeout) --counters (print every counter, not only the errors)");
        System.exit(2);
    }

    private static DXNet startNode(int id, String transport, String fabric, String listen, int timeoutMs)
            throws Exception {
        DXNetConfig c = new DXNetConfig(id);
        c.sendTimeoutMs = timeoutMs;
        c.requestTimeoutMs = timeoutMs;
        c.transport = transport;
        c.listen = listen;
        c.nativeConfig.put("fabric", fabric);
        c.nativeConfig.put("send_ring_size", Integer.toString(1 << 20));
        c.nativeConfig.put("srq_size", "256");
        c.nativeConfig.put("recv_buffer_count", "2048");
        DXNet n = DXNet.start(c);
        n.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        return n;
    }

    /** The receiving node: counts data, answers pings; the latch opens on a quit ping. */
    private static CountDownLatch serve(DXNet b) {
        CountDownLatch quit = new CountDownLatch(1);
        b.register(BytesMessage.class, d -> DATA_HANDLED.incrementAndGet());
        b.register(BytesRequest.class, ping -> {
            b.reply(ping, BytesResponse.echo(ping));
            if (ping.bytes.length == 0) {
                quit.countDown();
            }
        });
        return quit;
    }

    /** Sends from {@code threads} threads; the first failure of any of them is thrown. */
    private static void sendAll(DXNet a, int messages, int size, int threads)
            throws InterruptedException, NetworkException {
        List<Thread> ts = new ArrayList<>();
        java.util.concurrent.atomic.AtomicReference<NetworkException> failed =
                new java.util.concurrent.atomic.AtomicReference<>();
        for (int t = 0; t < threads; t++) {
            int share = messages / threads + (t < messages % threads ? 1 : 0);
            Thread th = new Thread(() -> {
                byte[] payload = new byte[size];
                try {
                    for (int i = 0; i < share; i++) {
                        a.sendMessage(new BytesMessage(1, payload));
                    }
                } catch (NetworkException e) {
                    failed.compareAndSet(null, e);
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) {
            th.join();
        }
        if (failed.get() != null) {
            throw failed.get();
        }
    }
}
