package io.ibdxnet.soak;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.NetworkException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * A slow receiver for a long time: node 0 sends checked messages to node 1
 * from {@value #THREADS} threads as fast as it can, node 1's handler takes
 * {@value #HANDLER_MICROS} µs per message and stalls for
 * {@value #STALL_MS} ms every {@value #STALL_EVERY_MS} ms. A sampler records
 * the largest backlog at each stage — the sender's unconfirmed bytes, the
 * receiver's incoming buffer queue (buffers, bytes) and handler queue — and
 * the run checks each stayed within its configured bound, that the heap
 * after a full GC did not grow, and that nothing was lost, duplicated,
 * reordered or corrupted.
 *
 * <p>Run: {@code SlowReceiverSoak.run(transport, seconds, seed)} (tests), or
 * {@code java io.ibdxnet.soak.SlowReceiverSoak --transport ib --seconds 180}.
 */
public final class SlowReceiverSoak {
    static final int THREADS = 2;
    static final int HANDLER_MICROS = 50;
    static final int STALL_MS = 500;
    static final int STALL_EVERY_MS = 3_000;
    /** The largest message payload; frames stay below the transports' maximum. */
    static final int MAX_DATA = 16 << 10;

    /** Largest values seen by the sampler, next to their configured bounds. */
    public static final class Report {
        public final Soak.Report messages = new Soak.Report();
        public long samples;
        public long stalls;
        public long maxUnconfirmed;
        /** The configured flow-control window; the bound adds one frame per sender (see run). */
        public long window;
        public long unconfirmedBound;
        public long maxIbqBuffers;
        public long ibqBuffersBound;
        public long maxIbqBytes;
        public long ibqBytesBound;
        /** ib: bytes kept beyond the source's share (unconfirmed, so within the sender's window). */
        public long maxBeyondShare;
        public long maxHandlerQueue;
        public long handlerQueueBound;
        /** Heap in use after a full GC, before the senders started and after the last message was checked. */
        public long heapBefore;
        public long heapAfter;
        /** Seconds the senders spent inside {@code sendMessage} over seconds sending (held back by flow control). */
        public double senderBlockedShare;

        /** The bounds that were exceeded, empty if none. */
        public List<String> violations() {
            List<String> v = new ArrayList<>();
            if (maxUnconfirmed > unconfirmedBound) {
                v.add("unconfirmed bytes " + maxUnconfirmed + " > " + unconfirmedBound);
            }
            if (maxIbqBuffers > ibqBuffersBound) {
                v.add("incoming buffers " + maxIbqBuffers + " > " + ibqBuffersBound);
            }
            if (maxIbqBytes > ibqBytesBound) {
                v.add("incoming bytes " + maxIbqBytes + " > " + ibqBytesBound);
            }
            if (maxBeyondShare > unconfirmedBound) {
                v.add("incoming bytes beyond the share " + maxBeyondShare + " > " + unconfirmedBound);
            }
            if (maxHandlerQueue > handlerQueueBound) {
                v.add("handler batches " + maxHandlerQueue + " > " + handlerQueueBound);
            }
            return v;
        }

        @Override
        public String toString() {
            return String.format("slow receiver: %s; %d handler stalls of %d ms; %d samples, max (bound): unconfirmed"
                    + " %d (%d) B, incoming buffers %d (%d), incoming bytes %d (%d), beyond the share %d (%d), handler"
                    + " batches %d (%d); heap after GC"
                    + " %.1f -> %.1f MiB; senders blocked %.0f %% of the time", messages, stalls, STALL_MS, samples,
                    maxUnconfirmed, unconfirmedBound, maxIbqBuffers, ibqBuffersBound, maxIbqBytes, ibqBytesBound,
                    maxBeyondShare, unconfirmedBound, maxHandlerQueue, handlerQueueBound, heapBefore / 1048576.0, heapAfter / 1048576.0,
                    100 * senderBlockedShare);
        }
    }

    private SlowReceiverSoak() {}

    public static void main(String[] args) throws Exception {
        java.util.Map<String, String> o = Soak.options("slow receiver soak", args,
                java.util.Set.of("--transport", "--seconds", "--seed"), java.util.Set.of());
        String transport = o.getOrDefault("--transport", "ib");
        int seconds = Integer.parseInt(o.getOrDefault("--seconds", "180"));
        long seed = o.containsKey("--seed") ? Long.parseLong(o.get("--seed")) : System.nanoTime();
        Report r = run(transport, seconds, seed);
        System.out.println("transport " + transport + ", seed " + seed + ": " + r);
        Soak.Report m = r.messages;
        boolean intact = m.lost + m.duplicated + m.reordered + m.corrupted == 0 && m.verified == m.sent;
        System.exit(intact && r.violations().isEmpty() ? 0 : 1);
    }

    /** The size of one received buffer: the engine's receive buffers on ib, the NIO read buffers on nio. */
    private static int incomingBufferSize(DXNetConfig c) {
        return c.transport.equals("ib") ? Integer.parseInt(c.nativeConfig.get("recv_buffer_size")) : c.nioBufferSize;
    }

    private static long heapAfterGc(MemoryMXBean memory) {
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return memory.getHeapMemoryUsage().getUsed();
    }

    public static Report run(String transport, int seconds, long seed) throws Exception {
        Report report = new Report();
        SequenceChecker checker = new SequenceChecker(2, THREADS);
        AtomicLong stalls = new AtomicLong();
        List<DXNet> nodes = new ArrayList<>();
        MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
        try {
            DXNetConfig[] configs = new DXNetConfig[2];
            for (int id = 0; id < 2; id++) {
                DXNetConfig c = Soak.nodeConfig(id, transport);
                c.ibqMaxBytes = 64 << 10;
                configs[id] = c;
                DXNet n = DXNet.start(c);
                n.registerMessageType(Soak.TYPE, (byte) 1, Soak.Numbered.class);
                nodes.add(n);
            }
            DXNet sender = nodes.get(0);
            DXNet receiver = nodes.get(1);
            sender.addNode(1, "127.0.0.1:" + receiver.localPort());
            receiver.addNode(0, "127.0.0.1:" + sender.localPort());
            long t0 = System.nanoTime();
            long[] nextStall = {t0 + STALL_EVERY_MS * 1_000_000L};
            receiver.register(Soak.TYPE, (byte) 1, m -> {
                checker.check(1, (Soak.Numbered) m);
                long now = System.nanoTime();
                if (now - nextStall[0] > 0) {
                    stalls.incrementAndGet();
                    LockSupport.parkNanos(STALL_MS * 1_000_000L);
                    nextStall[0] = System.nanoTime() + STALL_EVERY_MS * 1_000_000L;
                } else {
                    long until = now + HANDLER_MICROS * 1_000L;
                    while (System.nanoTime() - until < 0) {
                        Thread.onSpinWait(); // a handler doing work (parkNanos would overshoot)
                    }
                }
            });
            // Bounds: a frame can overshoot the window by its own size per sender
            // (added, then taken back when it does not fit); the incoming queue
            // takes one buffer beyond its byte limit when it is otherwise empty.
            DXNetConfig s = configs[0];
            DXNetConfig r = configs[1];
            int frame = sender.maxFrameSize();
            report.window = s.flowControlWindow;
            report.unconfirmedBound = s.flowControlWindow + (long) THREADS * frame;
            report.ibqBuffersBound = r.ibqMaxBuffers;
            report.ibqBytesBound = r.ibqMaxBytes + incomingBufferSize(r);
            report.handlerQueueBound = r.handlerQueueSize;
            report.heapBefore = heapAfterGc(memory);

            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicLong sent = new AtomicLong();
            AtomicLong blockedNanos = new AtomicLong();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                final int thread = t;
                Thread th = new Thread(() -> {
                    SplittableRandom rnd = new SplittableRandom(seed * 31 + thread);
                    long seq = 0;
                    long blocked = 0;
                    try {
                        while (!stop.get()) {
                            int size = rnd.nextInt(100) < 90 ? rnd.nextInt(256) : rnd.nextInt(MAX_DATA);
                            byte[] data = new byte[size];
                            rnd.nextBytes(data);
                            Soak.Numbered x = new Soak.Numbered(1, 0, thread, seq++, data);
                            long a = System.nanoTime();
                            sender.sendMessage(x);
                            blocked += System.nanoTime() - a;
                        }
                    } catch (RuntimeException e) {
                        failure.compareAndSet(null, e);
                    }
                    sent.addAndGet(seq);
                    blockedNanos.addAndGet(blocked);
                }, "slow-receiver-sender-" + t);
                threads.add(th);
                th.start();
            }
            long end = t0 + seconds * 1_000_000_000L;
            while (System.nanoTime() - end < 0 && failure.get() == null) {
                report.samples++;
                report.maxUnconfirmed = Math.max(report.maxUnconfirmed,
                        sender.transportStats().getOrDefault("unconfirmed_bytes", 0L));
                report.maxIbqBuffers = Math.max(report.maxIbqBuffers, receiver.incomingBuffersQueued());
                report.maxIbqBytes = Math.max(report.maxIbqBytes, receiver.incomingBytesQueued());
                report.maxBeyondShare = Math.max(report.maxBeyondShare, receiver.incomingBytesBeyondShare());
                report.maxHandlerQueue = Math.max(report.maxHandlerQueue, receiver.handlerBatchesQueued());
                Thread.sleep(2);
            }
            stop.set(true);
            for (Thread th : threads) {
                th.join();
            }
            double sendingSeconds = (System.nanoTime() - t0) / 1e9;
            if (failure.get() != null) {
                throw new IllegalStateException("a sender failed", failure.get());
            }
            report.messages.sent = sent.get();
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (checker.verified.get() < report.messages.sent && System.nanoTime() - deadline < 0) {
                Thread.sleep(5);
            }
            Thread.sleep(100); // duplicates would arrive now
            report.messages.seconds = (System.nanoTime() - t0) / 1e9;
            report.senderBlockedShare = blockedNanos.get() / 1e9 / (sendingSeconds * THREADS);
            report.heapAfter = heapAfterGc(memory);
        } finally {
            for (DXNet n : nodes) {
                n.close();
            }
        }
        report.stalls = stalls.get();
        report.messages.faults = report.stalls;
        checker.report(report.messages);
        return report;
    }
}
