package example;

import example.Messages.Event;
import example.Messages.Sum;
import example.Messages.SumReply;
import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import java.nio.file.Paths;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Node 0 adds up a stream of events and answers Sum requests; node 1 sends
 * 1000 events, then asks until all have arrived. {@code Example ib|nio} runs
 * both nodes in this JVM; {@code Example server|client FILE}, one node
 * configured by FILE. Exits with 1 on any failure.
 */
public final class Example {
    static final int EVENTS = 1000;

    private Example() {}

    public static void main(String[] args) {
        try {
            if (args.length == 2) {
                try (DXNet node = DXNet.start(Paths.get(args[1]))) {
                    if (args[0].equals("server")) {
                        if (!serve(node).await(60, TimeUnit.SECONDS)) {
                            throw new IllegalStateException("no Sum request found all " + EVENTS + " events within 60 s");
                        }
                    } else {
                        register(node);
                        drive(node, 0);
                    }
                }
            } else {
                bothInOneJvm(args.length == 1 ? args[0] : "nio");
            }
        } catch (Throwable e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static void bothInOneJvm(String transport) throws Exception {
        DXNetConfig c0 = new DXNetConfig(0);
        DXNetConfig c1 = new DXNetConfig(1);
        c0.transport = c1.transport = transport;
        c0.listen = c1.listen = "127.0.0.1:0"; // any free port: each node table gets the real one
        try (DXNet server = DXNet.start(c0); DXNet client = DXNet.start(c1)) {
            server.addNode(1, "127.0.0.1:" + client.localPort());
            client.addNode(0, "127.0.0.1:" + server.localPort());
            serve(server);
            register(client);
            drive(client, 0);
        }
    }

    /** Counts events and answers Sum; the latch opens once a reply has counted every event. */
    static CountDownLatch serve(DXNet node) {
        register(node);
        long[] totals = new long[2]; // count, sum
        CountDownLatch complete = new CountDownLatch(1);
        node.register(Event.class, event -> {
            synchronized (totals) {
                totals[0]++;
                totals[1] += event.value;
            }
        });
        node.register(Sum.class, sum -> {
            long[] now;
            synchronized (totals) {
                now = totals.clone();
            }
            if (node.reply(sum, new SumReply(sum, now[0], now[1])) && now[0] == EVENTS) {
                complete.countDown();
            }
        });
        return complete;
    }

    /** Sends the events to {@code server}, then asks until all have arrived. */
    static void drive(DXNet node, int server) throws Exception {
        long expected = 0;
        for (int i = 1; i <= EVENTS; i++) {
            node.sendMessage(new Event(server, i));
            expected += i;
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        SumReply r;
        do {
            r = node.sendSync(new Sum(server), 5_000);
        } while (r.count < EVENTS && System.nanoTime() < deadline);
        if (r.count != EVENTS || r.sum != expected) {
            throw new IllegalStateException("node " + server + " counted " + r.count + " events summing to " + r.sum
                    + ", expected " + EVENTS + " summing to " + expected);
        }
        System.out.println("node " + server + " received all " + EVENTS + " events (sum " + r.sum + ") over "
                + node.fabricName());
    }

    /** The reply's class, so a node can read replies (handled messages are registered by {@code register}). */
    static void register(DXNet node) {
        node.registerMessageType(Messages.SUM_REPLY, SumReply.class);
    }
}
