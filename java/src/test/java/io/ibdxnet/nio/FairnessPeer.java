package io.ibdxnet.nio;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.NetworkException;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.util.Map;

/**
 * A node in its own process for the fairness tests.
 * {@code server ID LISTEN NODES...}: answers BytesRequests with their bytes;
 * prints {@code READY}, then on {@code quit} from stdin one {@code STATS} line
 * (replies failed, handler errors, peak heap after GC, healthy) and exits.
 * {@code flood ID LISTEN NODES... -- DEST SECONDS}: sends requests of 1 KiB
 * to DEST as fast as it may for SECONDS without waiting for answers, prints
 * {@code FLOODED n}, then idles (the test stops it: a peer that never reads).
 * NODES are {@code id=host:port}.
 */
public final class FairnessPeer {
    private FairnessPeer() {}

    public static void main(String[] args) throws Exception {
        DXNetConfig c = new DXNetConfig(Integer.parseInt(args[1]));
        c.transport = "nio";
        c.listen = args[2];
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
                flood(node, Integer.parseInt(args[i + 1]), Integer.parseInt(args[i + 2]));
            }
        }
    }

    private static void serve(DXNet node) throws Exception {
        node.register(BytesRequest.class, r -> node.reply(r, BytesResponse.echo(r)));
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
        System.out.println("STATS replies_failed=" + s.get("replies_failed") + " handler_errors=" + s.get("handler_errors")
                + " handler_bytes_queued=" + node.handlerBytesQueued() + " incoming_bytes_queued=" + node.incomingBytesQueued()
                + " live_heap=" + live + " max_heap=" + Runtime.getRuntime().maxMemory() + " healthy=" + node.healthy());
        System.out.flush();
    }

    private static void flood(DXNet node, int dest, int seconds) throws Exception {
        byte[] payload = new byte[1024];
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        long sent = 0;
        long failed = 0;
        String firstFailure = "";
        while (System.nanoTime() < end) {
            try {
                node.sendAsync(new BytesRequest(dest, payload), 600_000);
                sent++;
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
