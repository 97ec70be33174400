package io.ibdxnet.app;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.NetworkException;
import io.ibdxnet.Request;
import io.ibdxnet.Response;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The main job: two nodes in one JVM exchange messages over the InfiniBand
 * transport (on {@code sim} without an RDMA device) and print a report:
 * message rate and throughput from several sender threads, then request
 * round trip times. Options: {@code --messages N --size BYTES --threads T
 * --requests R --fabric auto|sim|verbs}.
 */
public final class DemoMain {
    static final byte TYPE = 1;
    static final byte DATA = 1;
    static final byte PING = 2;
    static final byte PONG = 3;

    /** Payload message. */
    public static final class Data extends Message {
        byte[] payload = new byte[0];

        public Data() {
            super(TYPE, DATA);
        }

        Data(int dest, byte[] payload) {
            super(dest, TYPE, DATA);
            this.payload = payload;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeByteArray(payload);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            payload = in.readByteArray();
        }
    }

    /** Request carrying a timestamp. */
    public static final class Ping extends Request {
        long sent;

        public Ping() {
            super(TYPE, PING);
        }

        Ping(int dest, long sent) {
            super(dest, TYPE, PING);
            this.sent = sent;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeLong(sent);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            sent = in.readLong();
        }
    }

    /** The answer to a ping. */
    public static final class Pong extends Response {
        long sent;

        public Pong() {
            super(TYPE, PONG);
        }

        Pong(Ping p) {
            super(p, TYPE, PONG);
            sent = p.sent;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeLong(sent);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            sent = in.readLong();
        }
    }

    private DemoMain() {}

    public static void main(String[] args) throws Exception {
        int messages = 200_000;
        int size = 64;
        int threads = 2;
        int requests = 20_000;
        String fabric = "auto";
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--messages": messages = Integer.parseInt(args[i + 1]); break;
                case "--size": size = Integer.parseInt(args[i + 1]); break;
                case "--threads": threads = Integer.parseInt(args[i + 1]); break;
                case "--requests": requests = Integer.parseInt(args[i + 1]); break;
                case "--fabric": fabric = args[i + 1]; break;
                default:
                    System.err.println("unknown option " + args[i]);
                    System.exit(2);
            }
        }
        List<DXNet> nodes = new ArrayList<>();
        for (int id = 0; id < 2; id++) {
            DXNetConfig c = new DXNetConfig(id);
            c.nativeConfig.put("fabric", fabric);
            c.nativeConfig.put("listen", "127.0.0.1:0");
            c.nativeConfig.put("send_ring_size", Integer.toString(1 << 20));
            c.nativeConfig.put("srq_size", "256");
            c.nativeConfig.put("recv_buffer_count", "2048");
            // Two nodes share this machine's cores: idle engine threads yield at once.
            c.nativeConfig.put("parking_yield_after_ms", "0");
            c.handlerThreads = 1;
            DXNet n = DXNet.start(c);
            n.registerMessageType(TYPE, DATA, Data.class);
            n.registerMessageType(TYPE, PING, Ping.class);
            n.registerMessageType(TYPE, PONG, Pong.class);
            nodes.add(n);
        }
        DXNet a = nodes.get(0);
        DXNet b = nodes.get(1);
        a.addNode(1, "127.0.0.1:" + b.localPort());
        b.addNode(0, "127.0.0.1:" + a.localPort());
        AtomicLong received = new AtomicLong();
        AtomicLong bytes = new AtomicLong();
        b.register(TYPE, DATA, m -> {
            received.incrementAndGet();
            bytes.addAndGet(((Data) m).payload.length);
        });
        b.register(TYPE, PING, m -> {
            try {
                b.sendMessage(new Pong((Ping) m));
            } catch (NetworkException e) {
                throw new IllegalStateException(e);
            }
        });
        System.out.printf("ibdxnet demo: 2 nodes in one JVM, InfiniBand transport on %s / %s (fabric=%s)%n",
                a.fabricName(), b.fabricName(), fabric);
        // Warm-up, then the measured run.
        sendAll(a, 2_000, size, threads);
        awaitCount(received, 2_000);
        received.set(0);
        bytes.set(0);
        long t0 = System.nanoTime();
        sendAll(a, messages, size, threads);
        awaitCount(received, messages);
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.printf("messages: %d × %d B from %d threads in %.3f s: %.0f msg/s, %.1f MB/s payload%n",
                messages, size, threads, secs, messages / secs, bytes.get() / secs / 1e6);
        for (int i = 0; i < 1000; i++) {
            a.sendSync(new Ping(1, System.nanoTime()), 10_000);
        }
        long[] rtt = new long[requests];
        for (int i = 0; i < requests; i++) {
            long s = System.nanoTime();
            Pong p = a.sendSync(new Ping(1, s), 10_000);
            rtt[i] = System.nanoTime() - p.sent;
        }
        Arrays.sort(rtt);
        System.out.printf("request/response: %d round trips, RTT µs: p50 %.1f  p95 %.1f  p99 %.1f  p99.9 %.1f  max %.1f%n",
                requests, rtt[requests / 2] / 1e3, rtt[(int) (requests * 0.95)] / 1e3, rtt[(int) (requests * 0.99)] / 1e3,
                rtt[(int) (requests * 0.999)] / 1e3, rtt[requests - 1] / 1e3);
        System.out.println("native counters node 0: " + a.transportStats());
        System.out.println("dropped messages: " + (a.droppedMessages() + b.droppedMessages()));
        for (DXNet n : nodes) {
            n.close();
        }
    }

    /** Waits until {@code counter} reaches {@code expected}; fails after 120 s instead of hanging. */
    private static void awaitCount(AtomicLong counter, long expected) throws InterruptedException {
        long end = System.nanoTime() + 120_000_000_000L;
        while (counter.get() < expected) {
            if (System.nanoTime() > end) {
                System.err.println("demo: only " + counter.get() + " of " + expected + " messages arrived within 120 s");
                System.exit(1);
            }
            Thread.sleep(1);
        }
    }

    private static void sendAll(DXNet a, int messages, int size, int threads) throws InterruptedException {
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int share = messages / threads + (t < messages % threads ? 1 : 0);
            Thread th = new Thread(() -> {
                byte[] payload = new byte[size];
                try {
                    for (int i = 0; i < share; i++) {
                        a.sendMessage(new Data(1, payload));
                    }
                } catch (NetworkException e) {
                    throw new IllegalStateException(e);
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) {
            th.join();
        }
    }
}
