package io.ibdxnet.soak;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.NetworkException;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.zip.CRC32;

/**
 * The no-loss soak: nodes in one JVM send sequence-numbered messages of
 * random sizes to each other from several threads while faults are injected
 * (handler stalls, sender pauses, a tiny incoming buffer queue and handler
 * queue so backpressure engages constantly, small receive buffers), and
 * every message is checked on arrival: per (sender node, sender thread,
 * receiver) 0 lost, 0 duplicated, 0 reordered, CRC32 intact.
 *
 * <p>With {@code churn}, every node may hold 2 connections and its senders
 * send to one node after another in {@value #SLOT_MS} ms time slots shared by
 * all nodes, so the connections of earlier slots are idle and evicted all the
 * time (on {@code ib}: two-phase closes, records stranded by a close resent
 * on the next connection).
 *
 * <p>Run: {@code Soak.run(transport, nodes, totalMessages, seed, churn)} (tests), or
 * {@code java io.ibdxnet.soak.Soak --transport ib --messages 10000000 [--churn --nodes 6 [--max-connections 2 --fanout 1]]}.
 */
public final class Soak {
    static final byte TYPE = 5;
    static final int THREADS = 2;
    static final long SLOT_MS = 50;
    /**
     * Churn: the senders spread their messages over at least this many slots
     * (a sender ahead of it waits for the slot). Without it a fast host could
     * send everything within a slot or two, to one destination per node: no
     * connection to evict (a CI run saw 0 closes in 1.6 s).
     */
    static final int MIN_SLOTS = 16;

    /** A checked message. */
    public static final class Numbered extends Message {
        int sender;
        int thread;
        long seq;
        long crc;
        byte[] data;

        public Numbered() {
            super(TYPE, (byte) 1);
        }

        Numbered(int dest, int sender, int thread, long seq, byte[] data) {
            super(dest, TYPE, (byte) 1);
            this.sender = sender;
            this.thread = thread;
            this.seq = seq;
            this.data = data;
            this.crc = crc(data);
        }

        static long crc(byte[] d) {
            CRC32 c = new CRC32();
            c.update(d, 0, d.length);
            return c.getValue();
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeInt(sender);
            out.writeInt(thread);
            out.writeLong(seq);
            out.writeLong(crc);
            out.writeByteArray(data);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            sender = in.readInt();
            thread = in.readInt();
            seq = in.readLong();
            crc = in.readLong();
            data = in.readByteArray();
        }
    }

    /** What a soak run counted. */
    public static final class Report {
        public long sent;
        public long verified;
        public long lost;
        public long duplicated;
        public long reordered;
        public long corrupted;
        public long faults;
        public double seconds;
        /** Churn: connections closed in order (evictions) and what the closes cost. */
        public long closes;
        public long closesTimedOut;
        public long bytesResent;
        public long lossesReported;
        /** Churn: the time slots the senders' messages spanned (destinations changed at each). */
        public long slots;
        /**
         * The senders' {@code sendMessage} calls: the slowest, and how many took
         * 100 ms or more and 1 s or more. A call that had to connect (or
         * reconnect after an eviction) includes the connect's wait: in the
         * churn soaks these bound the connect latency from above.
         */
        public double slowestSendMs;
        public long sendsOver100Ms;
        public long sendsOver1S;

        @Override
        public String toString() {
            return String.format("soak: %d sent, %d verified in %.1f s (%.0f msg/s); lost %d, duplicated %d, reordered %d,"
                    + " corrupted %d; %d faults injected", sent, verified, seconds, verified / seconds, lost, duplicated,
                    reordered, corrupted, faults)
                    + (closes == 0 ? "" : String.format("; %d connection closes by eviction (%d timed out), %d bytes"
                    + " resent after a close, %d losses reported", closes, closesTimedOut, bytesResent, lossesReported))
                    + (slots == 0 ? "" : String.format("; %d time slots", slots))
                    + (slowestSendMs == 0 ? "" : String.format("; slowest send call %.1f ms, %d took >= 100 ms, %d >= 1 s",
                    slowestSendMs, sendsOver100Ms, sendsOver1S));
        }
    }

    private Soak() {}

    /**
     * A soak's command line: {@code --name value} options among {@code valued},
     * bare flags among {@code flags} (mapped to "true"). A bad one ends the
     * process with status 2 and a message naming it.
     */
    static java.util.Map<String, String> options(String tool, String[] args, java.util.Set<String> valued,
            java.util.Set<String> flags) {
        java.util.Map<String, String> m = new java.util.HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (flags.contains(args[i])) {
                m.put(args[i], "true");
            } else if (!valued.contains(args[i])) {
                System.err.println(tool + ": unknown option " + args[i]);
                System.exit(2);
            } else if (i + 1 >= args.length) {
                System.err.println(tool + ": " + args[i] + " needs a value");
                System.exit(2);
            } else {
                m.put(args[i], args[++i]);
            }
        }
        return m;
    }

    public static void main(String[] args) throws Exception {
        java.util.Map<String, String> o = options("soak", args,
                java.util.Set.of("--transport", "--messages", "--nodes", "--seed", "--max-connections", "--fanout"),
                java.util.Set.of("--churn"));
        String transport = o.getOrDefault("--transport", "ib");
        long messages = Long.parseLong(o.getOrDefault("--messages", "10000000"));
        int nodes = Integer.parseInt(o.getOrDefault("--nodes", "3"));
        long seed = o.containsKey("--seed") ? Long.parseLong(o.get("--seed")) : System.nanoTime();
        boolean churn = o.containsKey("--churn");
        int maxConnections = Integer.parseInt(o.getOrDefault("--max-connections", churn ? "2" : "0"));
        int fanout = Integer.parseInt(o.getOrDefault("--fanout", "1"));
        Report r = run(transport, nodes, messages, seed, maxConnections, fanout);
        System.out.println("transport " + transport + ", " + nodes + " nodes, seed " + seed
                + (maxConnections > 0 ? ", churn (max_connections " + maxConnections + ", fanout " + fanout + ")" : "") + ": " + r);
        System.exit(r.lost + r.duplicated + r.reordered + r.corrupted == 0 && r.verified == r.sent ? 0 : 1);
    }

    /**
     * A soak node: small queues, window and buffers so backpressure engages
     * all the time, one handler thread so arrival order is delivery order.
     */
    static DXNetConfig nodeConfig(int id, String transport) {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = transport;
        c.listen = "127.0.0.1:0";
        c.handlerThreads = 1;
        c.handlerQueueSize = 8;
        c.ibqMaxBuffers = 16;
        c.flowControlWindow = 256 << 10;
        c.sendTimeoutMs = 120_000;
        c.nioBufferSize = 4096;
        c.nioBufferCount = 32;
        c.nativeConfig.put("fabric", "sim");
        c.nativeConfig.put("parking_yield_after_ms", "0");
        c.nativeConfig.put("send_ring_size", Integer.toString(256 << 10));
        c.nativeConfig.put("recv_buffer_size", "4096");
        c.nativeConfig.put("srq_size", "64");
        c.nativeConfig.put("recv_buffer_count", "512");
        return c;
    }

    /** The churn time slot now: which node each node sends to. */
    private static long slot(long t0) {
        return (System.nanoTime() - t0) / (SLOT_MS * 1_000_000L);
    }

    public static Report run(String transport, int nodeCount, long total, long seed) throws Exception {
        return run(transport, nodeCount, total, seed, false);
    }

    public static Report run(String transport, int nodeCount, long total, long seed, boolean churn) throws Exception {
        return run(transport, nodeCount, total, seed, churn ? 2 : 0, 1);
    }

    /**
     * With {@code maxConnections} &gt; 0 (churn), each node may hold that many
     * connections and sends, in each time slot, to {@code fanout} nodes (the
     * next ones after those of the previous slot): over the slots to every
     * other node, all nodes at once (all-to-all), the connections of earlier
     * slots idle and evicted.
     */
    public static Report run(String transport, int nodeCount, long total, long seed, int maxConnections, int fanout)
            throws Exception {
        boolean churn = maxConnections > 0;
        Report report = new Report();
        SequenceChecker checker = new SequenceChecker(nodeCount, THREADS);
        AtomicLong verified = checker.verified;
        AtomicLong faults = new AtomicLong();
        AtomicLong slowestSendNs = new AtomicLong();
        AtomicLong sendsOver100Ms = new AtomicLong();
        AtomicLong sendsOver1S = new AtomicLong();
        AtomicLong lastSlot = new AtomicLong(-1);
        List<DXNet> nodes = new ArrayList<>();
        try {
            for (int id = 0; id < nodeCount; id++) {
                DXNetConfig c = nodeConfig(id, transport);
                if (churn) {
                    c.maxConnections = maxConnections;
                }
                DXNet n = DXNet.start(c);
                n.registerMessageType(TYPE, (byte) 1, Numbered.class);
                SplittableRandom stalls = new SplittableRandom(seed ^ id);
                final int self = id;
                n.register(TYPE, (byte) 1, m -> {
                    checker.check(self, (Numbered) m);
                    if (stalls.nextInt(20_000) == 0) {
                        faults.incrementAndGet();
                        LockSupport.parkNanos(2_000_000 + stalls.nextInt(8_000_000)); // a stalled handler
                    }
                });
                nodes.add(n);
            }
            for (DXNet a : nodes) {
                for (DXNet b : nodes) {
                    if (a != b) {
                        a.addNode(b.nodeId(), "127.0.0.1:" + b.localPort());
                    }
                }
            }
            long perThread = Math.max(1, (total + (long) nodeCount * THREADS - 1) / ((long) nodeCount * THREADS)); // at least total
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            long t0 = System.nanoTime();
            for (DXNet from : nodes) {
                for (int t = 0; t < THREADS; t++) {
                    final int thread = t;
                    Thread th = new Thread(() -> {
                        SplittableRandom rnd = new SplittableRandom(seed * 31 + from.nodeId() * 7 + thread);
                        long[] seqTo = new long[nodeCount];
                        try {
                            for (long i = 0; i < perThread; i++) {
                                if (churn) {
                                    long due = i * MIN_SLOTS / perThread;
                                    while (slot(t0) < due) {
                                        LockSupport.parkNanos(t0 + due * SLOT_MS * 1_000_000L - System.nanoTime());
                                    }
                                    lastSlot.accumulateAndGet(slot(t0), Math::max);
                                }
                                int dest = churn
                                        ? (int) ((from.nodeId() + 1 + (slot(t0) * fanout + rnd.nextInt(fanout)) % (nodeCount - 1))
                                                % nodeCount)
                                        : (from.nodeId() + 1 + rnd.nextInt(nodeCount - 1)) % nodeCount;
                                int size = rnd.nextInt(100) < 95 ? rnd.nextInt(128) : rnd.nextInt(64 << 10);
                                byte[] data = new byte[size];
                                rnd.nextBytes(data);
                                Numbered m = new Numbered(dest, from.nodeId(), thread, seqTo[dest]++, data);
                                long sendStart = System.nanoTime();
                                from.sendMessage(m);
                                long took = System.nanoTime() - sendStart;
                                if (took >= 100_000_000L) {
                                    sendsOver100Ms.incrementAndGet();
                                    if (took >= 1_000_000_000L) {
                                        sendsOver1S.incrementAndGet();
                                    }
                                }
                                slowestSendNs.accumulateAndGet(took, Math::max);
                                if (rnd.nextInt(200_000) == 0) {
                                    faults.incrementAndGet();
                                    LockSupport.parkNanos(5_000_000); // a paused sender
                                }
                            }
                        } catch (RuntimeException e) {
                            failure.compareAndSet(null, e);
                        }
                    }, "soak-sender-" + from.nodeId() + "-" + t);
                    threads.add(th);
                    th.start();
                }
            }
            for (Thread th : threads) {
                th.join();
            }
            if (failure.get() != null) {
                throw new IllegalStateException("a sender failed", failure.get());
            }
            report.sent = perThread * nodeCount * THREADS;
            long end = System.nanoTime() + 120_000_000_000L;
            long last = System.nanoTime();
            while (verified.get() < report.sent && System.nanoTime() < end) {
                Thread.sleep(5);
                if (System.nanoTime() - last > 5_000_000_000L) {
                    System.err.printf("soak: %d / %d verified%n", verified.get(), report.sent);
                    last = System.nanoTime();
                }
            }
            Thread.sleep(100); // duplicates would arrive now
            report.seconds = (System.nanoTime() - t0) / 1e9;
            for (DXNet n : nodes) {
                java.util.Map<String, Long> st = n.transportStats();
                report.closes += st.getOrDefault(transport.equals("ib") ? "connections_closed" : "evictions", 0L);
                report.closesTimedOut += st.getOrDefault("closes_timed_out", 0L);
                report.bytesResent += st.getOrDefault("bytes_resent_after_close", 0L);
                report.lossesReported += st.getOrDefault("closes_with_unsent_data", 0L);
            }
        } finally {
            for (DXNet n : nodes) {
                n.close();
            }
        }
        report.faults = faults.get();
        report.slowestSendMs = slowestSendNs.get() / 1e6;
        report.sendsOver100Ms = sendsOver100Ms.get();
        report.sendsOver1S = sendsOver1S.get();
        report.slots = lastSlot.get() + 1;
        checker.report(report);
        return report;
    }
}
