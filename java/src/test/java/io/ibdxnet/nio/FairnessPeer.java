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
 * NODES are {@code id=host:port}.
 */
public final class FairnessPeer {
    private FairnessPeer() {}

    public static void main(String[] args) throws Exception {
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
}
