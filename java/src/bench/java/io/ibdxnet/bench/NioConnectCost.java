package io.ibdxnet.bench;

import io.ibdxnet.nio.NioSettings;
import io.ibdxnet.nio.NioTransport;
import io.ibdxnet.transport.AuthKey;
import io.ibdxnet.transport.TransportListener;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Connection set-up time over {@code nio} with and without a pre-shared key,
 * in one run: for each of N fresh client transports (new process-like
 * instance, new socket) the time from the first send to the open connection
 * (TCP connect, then hello/reply, or hello/challenge/proof/final reply with
 * the key). Keyed and unkeyed connections alternate, so both see the same
 * machine state. Usage: {@code NioConnectCost [N=200]}.
 */
public final class NioConnectCost {
    private static final int WARM_UP = 50;

    private NioConnectCost() {}

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        Logger quiet = Logger.getLogger("io.ibdxnet");
        quiet.setLevel(Level.SEVERE); // every closed client is a "failed connection" on the acceptor
        Path keyFile = Files.createTempFile("dxnet-bench-key", ".txt");
        keyFile.toFile().deleteOnExit();
        Files.setPosixFilePermissions(keyFile, PosixFilePermissions.fromString("rw-------"));
        Files.write(keyFile, "a benchmark key of 32 bytes.....".getBytes(StandardCharsets.US_ASCII));
        AuthKey key = AuthKey.load(keyFile.toString());

        TransportListener sink = new TransportListener() {
            @Override
            public boolean onBuffer(io.ibdxnet.transport.IncomingBuffer b) {
                b.release();
                return true;
            }

            @Override
            public void onDisconnected(int node) {}
        };
        NioTransport[] acceptors = {new NioTransport(settings(0, null), sink), new NioTransport(settings(0, key), sink)};
        long[][] nanos = new long[2][n];
        int clients = WARM_UP + n;
        for (NioTransport a : acceptors) {
            for (int id = 1; id <= clients; id++) {
                a.addNode(id, "127.0.0.1", 1); // the acceptor never connects back
            }
        }
        for (int i = 0; i < clients; i++) {
            for (int mode = 0; mode < 2; mode++) {
                NioTransport client = new NioTransport(settings(i + 1, mode == 1 ? key : null), sink);
                client.addNode(0, "127.0.0.1", acceptors[mode].localPort());
                long t0 = System.nanoTime();
                client.send(0, new byte[] {0, 0, 0, 0}, new byte[0], 0, 0, t0 + 10_000_000_000L);
                long t = System.nanoTime() - t0;
                client.close();
                if (i >= WARM_UP) {
                    nanos[mode][i - WARM_UP] = t;
                }
            }
        }
        for (NioTransport a : acceptors) {
            a.close();
        }
        System.out.printf("nio connection set-up, %d fresh connections each (after %d warm-up), keyed and unkeyed alternating%n", n, WARM_UP);
        System.out.printf("%-8s %10s %10s %10s %10s%n", "key", "median µs", "p90 µs", "min µs", "max µs");
        String[] names = {"none", "HMAC"};
        for (int mode = 0; mode < 2; mode++) {
            long[] s = nanos[mode];
            Arrays.sort(s);
            System.out.printf("%-8s %10.1f %10.1f %10.1f %10.1f%n", names[mode], s[n / 2] / 1e3, s[n * 9 / 10] / 1e3, s[0] / 1e3,
                    s[n - 1] / 1e3);
        }
    }

    private static NioSettings settings(int nodeId, AuthKey key) {
        NioSettings s = new NioSettings();
        s.nodeId = nodeId;
        s.listenHost = "127.0.0.1";
        s.listenPort = 0;
        s.authKey = key;
        s.bufferCount = 8;
        s.ringSize = 64 << 10;
        return s;
    }
}
