package io.ibdxnet.bench;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;

/**
 * How late a fresh JVM's first request timeout comes, against its later
 * ones: two nodes in this process, the receiver never answers, and R
 * requests in turn, each with a 100 ms deadline, each waited for. Prints,
 * per request, the time from {@code sendAsync} to its future's failure.
 * bench/first-timeout.sh runs it in several fresh JVMs. Usage:
 * {@code FirstTimeout nio|ib|loopback [R=5]} (ib on the sim fabric).
 */
public final class FirstTimeout {
    static final int DEADLINE_MS = 100;

    private FirstTimeout() {}

    public static void main(String[] args) throws Exception {
        String transport = args[0];
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        DXNet silent = DXNet.start(config(1, transport, null), n -> {
            types(n);
            n.register(BytesRequest.class, r -> { }); // never answers
        });
        DXNet asker = DXNet.start(config(0, transport, "127.0.0.1:" + silent.localPort()), FirstTimeout::types);
        silent.addNode(0, "127.0.0.1:" + asker.localPort());
        StringBuilder line = new StringBuilder("first-timeout " + transport + " ms after sendAsync (deadline "
                + DEADLINE_MS + " ms):");
        for (int i = 0; i < rounds; i++) {
            long t0 = System.nanoTime();
            long[] end = new long[1];
            CountDownLatch done = new CountDownLatch(1);
            CompletableFuture<BytesResponse> f = asker.sendAsync(new BytesRequest(1, new byte[8]), DEADLINE_MS);
            f.whenComplete((r, e) -> {
                end[0] = System.nanoTime();
                done.countDown();
            });
            done.await();
            line.append(String.format(" %.1f", (end[0] - t0) / 1e6));
        }
        System.out.println(line);
        asker.close();
        silent.close();
    }

    private static void types(DXNet n) {
        n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
    }

    /** Node {@code id} on a port of its own; {@code peer}: node 1's address, for node 0. */
    private static DXNetConfig config(int id, String transport, String peer) {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = transport;
        c.listen = "127.0.0.1:0";
        if (peer != null) {
            c.nodes.put(1, peer);
        }
        if (transport.equals("ib")) {
            c.nativeConfig.put("fabric", "sim");
        }
        return c;
    }
}
