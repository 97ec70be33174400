package io.ibdxnet.netns;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.NetworkException;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * A DXNet node in a process of its own (for {@link NetnsHost}), driven by
 * lines on stdin, answering on stdout:
 * <pre>
 *   args: ID TRANSPORT LISTEN [KEY_FILE|-] [PEER_ID=HOST:PORT ...]
 *   prints "ready PORT" once started; it answers every BytesRequest.
 *   ping NODE MS  →  "answered NODE ms=T attempts=N [last=REASON]" (first answer; a failed send is retried 10 ms later)
 *                     or "unanswered NODE ms=T attempts=N last=REASON" after MS
 *   stats         →  "stats {name=value, ...}" (the transport's counters)
 *   quit          →  closes the node, exits
 * </pre>
 */
public final class NetnsNode {
    private NetnsNode() {}

    public static void main(String[] args) throws Exception {
        DXNetConfig c = new DXNetConfig(Integer.parseInt(args[0]));
        c.transport = args[1];
        c.listen = args[2];
        if (args.length > 3 && !args[3].equals("-")) {
            c.authKeyFile = args[3];
        }
        DXNet n = DXNet.start(c);
        n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        n.register(BytesRequest.class, r -> n.reply(r, BytesResponse.echo(r)));
        for (int i = 4; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            n.addNode(Integer.parseInt(args[i].substring(0, eq)), args[i].substring(eq + 1));
        }
        System.out.println("ready " + n.localPort());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("ping")) {
                System.out.println(ping(n, Integer.parseInt(w[1]), Long.parseLong(w[2])));
            } else if (w[0].equals("stats")) {
                Map<String, Long> s = n.transportStats();
                System.out.println("stats " + s);
            } else if (w[0].equals("quit")) {
                break;
            }
        }
        n.close();
        System.exit(0);
    }

    /** Requests until one is answered or {@code ms} passed; failed sends (no connection yet) are retried at once. */
    private static String ping(DXNet n, int node, long ms) {
        long t0 = System.nanoTime();
        long end = t0 + ms * 1_000_000L;
        int attempts = 0;
        String last = "none";
        while (System.nanoTime() - end < 0) {
            attempts++;
            try {
                int left = (int) Math.max(1, (end - System.nanoTime()) / 1_000_000L);
                n.sendSync(new BytesRequest(node, new byte[8]), left);
                return "answered " + node + " ms=" + (System.nanoTime() - t0) / 1_000_000L + " attempts=" + attempts
                        + (attempts > 1 ? " last=" + last : "");
            } catch (NetworkException e) {
                last = e.getMessage().replace('\n', ' ');
                pause(10); // each attempt takes a connection (and its ring): not a busy loop
            }
        }
        return "unanswered " + node + " ms=" + (System.nanoTime() - t0) / 1_000_000L + " attempts=" + attempts + " last=" + last;
    }

    private static void pause(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
