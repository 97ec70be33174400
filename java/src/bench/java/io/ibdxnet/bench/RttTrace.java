package io.ibdxnet.bench;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.MessageType;
import io.ibdxnet.Request;
import io.ibdxnet.Response;
import java.util.Arrays;
import java.util.Locale;

/**
 * Where a round trip's microseconds go (issue 31, item 1): two nodes in this
 * JVM, node 0 sends requests to node 1 one at a time, and every round trip
 * stamps {@link System#nanoTime} at eight points on the threads that pass
 * them (one clock: one process):
 *
 * <ol start="0">
 * <li>A's caller calls {@code sendSync};
 * <li>the request is serialised (A's caller, into the send ring);
 * <li>B deserialises it (B's receiving thread, after the wire and the up-call);
 * <li>B's handler starts (the receiving thread inline, else a handler thread);
 * <li>the response is serialised (B's handler thread);
 * <li>B's {@code reply} returns (the response posted, or handed to the send thread);
 * <li>A deserialises the response (A's receiving thread);
 * <li>A's caller returns from {@code sendSync} (woken, or done spinning).
 * </ol>
 *
 * Prints each hop's median and 90th percentile over {@code --messages}
 * round trips after as many for warm-up, and the round trip's; exits with
 * status 1 (no table) if a round trip missed a point.
 *
 * <pre>--transport ib|nio|loopback (ib) --messages N (20000) --gap-us US (0: a pause after each round trip) --handleOnReceivingThread true|false (true)
 * --native KEY=VALUE (engine settings, repeatable; fabric=sim unless given)</pre>
 */
public final class RttTrace {
    static final int POINTS = 8;
    static final String[] HOPS = {
        "0>1 caller: sendSync to serialised",
        "1>2 request: post, wire, B's up-call, B's receive path",
        "2>3 B: deserialised to handler",
        "3>4 B: handler to response serialised",
        "4>5 B: response serialised to reply returned",
        "4>6 response: post, wire, A's up-call, A's receive path",
        "6>7 A: response deserialised to caller returned",
        "0>7 round trip",
    };
    static final int[][] SPANS = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {4, 6}, {6, 7}, {0, 7}};
    static long[] stamps = new long[0];

    static void stamp(long seq, int point) {
        if (seq >= 0 && seq * POINTS + point < stamps.length) {
            stamps[(int) (seq * POINTS + point)] = System.nanoTime();
        }
    }

    /** A request carrying its round trip's number. */
    public static final class Ask extends Request<Answer> {
        static final MessageType TYPE = MessageType.of(9, 1);
        long seq = -1;

        public Ask() {
            super(TYPE);
        }

        Ask(int dest, long seq) {
            super(dest, TYPE);
            this.seq = seq;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            stamp(seq, 1);
            out.writeLong(seq);
        }

        @Override
        protected int payloadSize() {
            return 8;
        }

        @Override
        protected void importPayload(MessageImporter in) {
            seq = in.readLong();
            stamp(seq, 2);
        }
    }

    /** Its answer, carrying the number back. */
    public static final class Answer extends Response {
        static final MessageType TYPE = MessageType.of(9, 2);
        long seq = -1;

        public Answer() {
            super(TYPE);
        }

        Answer(Ask ask) {
            super(ask, TYPE);
            this.seq = ask.seq;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            stamp(seq, 4);
            out.writeLong(seq);
        }

        @Override
        protected int payloadSize() {
            return 8;
        }

        @Override
        protected void importPayload(MessageImporter in) {
            seq = in.readLong();
            stamp(seq, 6);
        }
    }

    private RttTrace() {}

    public static void main(String[] args) throws Exception {
        String transport = "ib";
        int messages = 20_000;
        long gapUs = 0;
        boolean inline = true;
        java.util.Map<String, String> natives = new java.util.LinkedHashMap<>();
        natives.put("fabric", "sim");
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--transport": transport = args[i + 1]; break;
                case "--messages": messages = Integer.parseInt(args[i + 1]); break;
                case "--gap-us": gapUs = Long.parseLong(args[i + 1]); break;
                case "--handleOnReceivingThread": inline = Boolean.parseBoolean(args[i + 1]); break;
                case "--native": {
                    String[] kv = args[i + 1].split("=", 2);
                    natives.put(kv[0], kv.length > 1 ? kv[1] : "");
                    break;
                }
                default:
                    System.err.println("rtt-trace: unknown option " + args[i]);
                    System.exit(2);
            }
        }
        DXNet[] nodes = new DXNet[2];
        try {
            for (int id = 0; id < 2; id++) {
                DXNetConfig c = new DXNetConfig(id);
                c.transport = transport;
                c.listen = "127.0.0.1:0";
                c.handlerThreads = 1;
                c.handleOnReceivingThread = inline;
                c.nativeConfig.putAll(natives);
                DXNet n = DXNet.start(c);
                n.registerMessageType(Ask.TYPE, Ask.class);
                n.registerMessageType(Answer.TYPE, Answer.class);
                n.register(Ask.class, ask -> {
                    stamp(ask.seq, 3);
                    n.reply(ask, new Answer(ask));
                    stamp(ask.seq, 5);
                });
                nodes[id] = n;
            }
            nodes[0].addNode(1, "127.0.0.1:" + nodes[1].localPort());
            nodes[1].addNode(0, "127.0.0.1:" + nodes[0].localPort());
            stamps = new long[messages * POINTS];
            for (int round = 0; round < 2; round++) { // a warm-up, then the measured one
                Arrays.fill(stamps, 0);
                for (int i = 0; i < messages; i++) {
                    stamp(i, 0);
                    nodes[0].sendSync(new Ask(1, i), 60_000);
                    stamp(i, 7);
                    if (gapUs > 0) {
                        java.util.concurrent.locks.LockSupport.parkNanos(gapUs * 1000);
                    }
                }
            }
        } finally {
            for (DXNet n : nodes) {
                if (n != null) {
                    n.close();
                }
            }
        }
        System.out.printf(Locale.ROOT, "# rtt-trace: %s, %d round trips, gap %d µs, handleOnReceivingThread=%s, native %s%n",
                transport, messages, gapUs, inline, natives);
        long missing = Arrays.stream(stamps).filter(t -> t == 0).count();
        if (missing > 0) {
            // A point some round trip did not pass (a message exported twice, or not at all): no table.
            System.out.printf(Locale.ROOT, "rtt-trace: %d of %d stamps missing%n", missing, stamps.length);
            System.exit(1);
        }
        System.out.printf(Locale.ROOT, "%-58s %9s %9s %9s%n", "hop", "p50 µs", "p90 µs", "p99 µs");
        for (int h = 0; h < HOPS.length; h++) {
            long[] d = new long[messages];
            for (int i = 0; i < messages; i++) {
                d[i] = stamps[i * POINTS + SPANS[h][1]] - stamps[i * POINTS + SPANS[h][0]];
            }
            Arrays.sort(d);
            System.out.printf(Locale.ROOT, "%-58s %9.2f %9.2f %9.2f%n", HOPS[h], d[messages / 2] / 1e3,
                    d[messages * 9 / 10] / 1e3, d[messages * 99 / 100] / 1e3);
        }
    }
}
