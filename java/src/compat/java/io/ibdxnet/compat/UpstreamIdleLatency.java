package io.ibdxnet.compat;

import de.hhu.bsinfo.dxnet.ib.MsgrcJNIBinding;
import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.core.Frame;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * How long a message waits after its sender idled: node 1 writes one message
 * after a gap, and the time until our node 0 (ib on sim, same JVM) has it in its
 * handler is recorded, per gap; then the CPU node 1's idle send thread uses over
 * 5 s. Node 1 is upstream's real {@code MsgrcJNIBinding} driven by
 * {@link UpstreamPeer} (the compat path), or with {@code -Dsender=ours} our own
 * DXNet node (the same engine, woken by our Java's doorbell), for comparison.
 * The main thread waits for each message blocked, so it holds no core.
 *
 * <pre>java -cp COMPAT_CLASSPATH -Djava.library.path=target/release \
 *   [-Dsender=upstream|ours] [-Dcompat.keys=K=V;...] [-Dkeys=K=V;...] \
 *   io.ibdxnet.compat.UpstreamIdleLatency [SAMPLES [GAPS_MS...]]</pre>
 *
 * {@code compat.keys} are engine keys for upstream's node 1 ({@code ibdxnet.compat.keys}),
 * {@code keys} for our nodes (e.g. {@code parking_sleep_after_us=never}).
 */
public final class UpstreamIdleLatency {
    private UpstreamIdleLatency() {}

    /** Sends one small message from node 1 to node 0. */
    private interface Sender extends AutoCloseable {
        void send() throws Exception;

        @Override
        void close();
    }

    public static void main(String[] args) throws Exception {
        int samples = args.length > 0 ? Integer.parseInt(args[0]) : 20;
        long[] gaps = args.length > 1 ? Arrays.stream(args, 1, args.length).mapToLong(Long::parseLong).toArray()
                : new long[] {0, 10, 100, 1000};
        int port = 20000 + ThreadLocalRandom.current().nextInt(20000);
        BlockingQueue<byte[]> got = new LinkedBlockingQueue<>();
        DXNet ours = startNode(0, port, got);
        boolean upstream = !"ours".equals(System.getProperty("sender", "upstream"));
        try (Sender sender = upstream ? upstreamSender(port) : oursSender(port)) {
            for (int i = 0; i < 200; i++) { // warm-up
                sender.send();
                got.take();
            }
            System.out.printf("sender=%s keys=%s compat.keys=%s%n", upstream ? "upstream" : "ours",
                    System.getProperty("keys", "-"), System.getProperty("compat.keys", "-"));
            for (long gap : gaps) {
                long[] lat = new long[samples];
                for (int i = 0; i < samples; i++) {
                    if (gap > 0) {
                        Thread.sleep(gap);
                    }
                    long t0 = System.nanoTime();
                    sender.send();
                    got.take();
                    lat[i] = System.nanoTime() - t0;
                }
                Arrays.sort(lat);
                System.out.printf("gap_ms=%d samples=%d p50_us=%.1f p90_us=%.1f p99_us=%.1f max_us=%.1f%n", gap,
                        samples, lat[samples / 2] / 1e3, lat[samples * 9 / 10] / 1e3,
                        lat[Math.min(samples - 1, (int) Math.ceil(samples * 0.99) - 1)] / 1e3, lat[samples - 1] / 1e3);
            }
            Thread.sleep(1500); // past any busy phase
            long a = sendThreadCpuNs();
            long t = System.nanoTime();
            Thread.sleep(5000);
            double pct = 100.0 * (sendThreadCpuNs() - a) / (System.nanoTime() - t);
            System.out.printf("idle_send_thread_cpu_pct=%.2f%n", pct);
        } finally {
            ours.close();
        }
    }

    /** Our node {@code id} on 127.0.0.(id+1), collecting BytesMessages into {@code got}. */
    private static DXNet startNode(int id, int port, BlockingQueue<byte[]> got) throws Exception {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = "ib";
        c.nativeConfig.put("fabric", "sim");
        c.nativeConfig.put("listen", "127.0.0." + (id + 1) + ":" + port);
        c.nativeConfig.put("send_ring_size", Integer.toString(256 << 10));
        c.nativeConfig.put("srq_size", "128");
        c.nativeConfig.put("recv_buffer_count", "1024");
        c.nativeConfig.put("discovery_interval_ms", "100");
        for (String kv : System.getProperty("keys", "").split(";")) {
            if (kv.contains("=")) {
                c.nativeConfig.put(kv.substring(0, kv.indexOf('=')).trim(), kv.substring(kv.indexOf('=') + 1).trim());
            }
        }
        DXNet n = DXNet.start(c);
        n.register(BytesMessage.class, m -> got.add(m.bytes));
        n.addNode(1 - id, "127.0.0." + (2 - id) + ":" + port);
        return n;
    }

    private static Sender oursSender(int port) throws Exception {
        DXNet one = startNode(1, port, new LinkedBlockingQueue<>());
        return new Sender() {
            @Override
            public void send() throws Exception {
                one.sendMessage(new BytesMessage(0, new byte[32]));
            }

            @Override
            public void close() {
                one.close();
            }
        };
    }

    private static Sender upstreamSender(int port) throws Exception {
        System.setProperty("ibdxnet.compat.listen", "127.0.0.2:" + port);
        System.setProperty("ibdxnet.compat.keys", "fabric=sim;discovery_interval_ms=100;" + System.getProperty("compat.keys", ""));
        int ring = 1 << 20;
        UpstreamPeer peer = new UpstreamPeer(ring);
        if (!MsgrcJNIBinding.init(peer, false, false, 0, (short) 1, 5000, 100, 20, 128, 2000, 2000, ring,
                1024L * 32768, 32768, 4)) {
            throw new IllegalStateException("init refused");
        }
        MsgrcJNIBinding.addNode(0x7F000001);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (MsgrcJNIBinding.createConnection((short) 0) != 0) {
            if (System.nanoTime() > deadline) {
                MsgrcJNIBinding.shutdown();
                throw new IllegalStateException("no connection to node 0");
            }
            Thread.sleep(20);
        }
        peer.connect(0, MsgrcJNIBinding.getSendBufferAddress((short) 0));
        byte[] payload = UpstreamPeer.byteArrayPayload(new byte[32]);
        return new Sender() {
            @Override
            public void send() {
                peer.sendFrame(BytesMessage.TYPE.type(), BytesMessage.TYPE.subtype(), Frame.FIRST | Frame.LAST, 0,
                        payload);
            }

            @Override
            public void close() {
                MsgrcJNIBinding.shutdown();
            }
        };
    }

    /**
     * CPU time (ns, from schedstat) of node 1's send thread: the kernel keeps 15
     * bytes of a name, so both nodes' send threads read "ibdxnet-send-00"; node 1's
     * started after node 0's and has the higher thread id.
     */
    private static long sendThreadCpuNs() throws IOException {
        Path newest = null;
        try (java.util.stream.Stream<Path> tasks = Files.list(Paths.get("/proc/self/task"))) {
            for (Path t : (Iterable<Path>) tasks::iterator) {
                String name = new String(Files.readAllBytes(t.resolve("comm"))).trim();
                if (name.startsWith("ibdxnet-send") && (newest == null || Long.parseLong(t.getFileName().toString())
                        > Long.parseLong(newest.getFileName().toString()))) {
                    newest = t;
                }
            }
        }
        if (newest == null) {
            throw new IllegalStateException("no send thread of node 1");
        }
        return Long.parseLong(new String(Files.readAllBytes(newest.resolve("schedstat"))).trim().split(" ")[0]);
    }
}
