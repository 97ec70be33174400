package io.ibdxnet.bench;

import io.aeron.Aeron;
import io.aeron.ExclusivePublication;
import io.aeron.FragmentAssembler;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.logbuffer.FragmentHandler;
import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.HdrHistogram.Histogram;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.YieldingIdleStrategy;

/**
 * Aeron's round trip on this machine, beside {@link Workload}'s rtt rows and
 * {@link NettyBaseline} (issue 31): an embedded media driver, a ping thread
 * (this one) that sends {@code --size} bytes and waits for the echo, and a
 * pong thread that echoes every message back, over two UDP channels on
 * localhost (one each way) or over IPC (two streams). Every round trip is
 * recorded after a warm-up; prints the {@link Results} line
 * ({@code impl=aeron-udp} or {@code aeron-ipc}, {@code handlers=0}: the
 * echo is the pong thread itself). The driver's threading mode and the idle
 * strategy of every thread (driver, ping, pong) are in its {@code native}
 * column; CPU per message is the whole process's (driver included) over
 * the measured round trips, as Workload counts it.
 *
 * <pre>--channel udp|ipc (or --transport aeron-udp|aeron-ipc, as bench/workloads.sh passes it)
 * --size BYTES (64) --messages ROUND_TRIPS (20000) --threading shared|shared_network|dedicated (shared)
 * --idle yield|backoff|spin|sleep (yield) --backoff SPINS,YIELDS,MIN_PARK_NS,MAX_PARK_NS
 * --port P (udp: P and P+1; default two free ports) --dir PARENT (default /dev/shm, else java.io.tmpdir)</pre>
 *
 * <p>The JVM needs {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED}
 * (Agrona 2 uses {@code jdk.internal.misc.Unsafe}).
 */
public final class AeronPingPong {
    private AeronPingPong() {}

    private static final int PING_STREAM = 1001;
    private static final int PONG_STREAM = 1002;
    /** How long one round trip (or connecting) may take before the run fails: a lost echo must not hang the suite. */
    private static final long STALL_NS = 60_000_000_000L;

    private static String channel = "udp";
    private static String threading = "shared";
    /**
     * Yield on every empty poll (Agrona's YieldingIdleStrategy): on 2 cores the
     * three busy threads (driver, ping, pong) must hand each other the CPU, and
     * other processes get it too. No spinning: on this 2-core VM, 100
     * onSpinWait spins before the yields cost 10x in median RTT (udp,
     * 2026-11-29, loaded host), and backoff's parks put milliseconds into p99.
     */
    private static String idle = "yield";
    /** --idle backoff: yield at once (no spins, as above), park 1-100 µs after 1000 empty polls. */
    private static long[] backoff = {0, 1_000, 1_000, 100_000};
    private static int port = -1;
    private static String dirParent;

    public static void main(String[] args) throws Exception {
        Results.Row row = new Results.Row();
        row.pattern = "rtt";
        row.handlers = 0;
        row.messages = 20_000;
        parse(args, row);
        if (!Object.class.getModule().isExported("jdk.internal.misc", AeronPingPong.class.getModule())) {
            // Agrona 2 reaches jdk.internal.misc.Unsafe; without the export it fails deep in the driver's start.
            usage("run java with --add-exports java.base/jdk.internal.misc=ALL-UNNAMED (Agrona 2's Unsafe)");
        }
        row.impl = "aeron-" + channel;
        row.nativeSettings = "threading=" + threading + ";idle=" + idleName();

        Path dir = Files.createTempDirectory(Paths.get(dirParent), "ibdxnet-aeron-");
        // Also on ^C or System.exit: no driver directory left behind.
        Thread cleanup = new Thread(() -> deleteTree(dir), "aeron-dir-cleanup");
        Runtime.getRuntime().addShutdownHook(cleanup);
        System.err.printf("aeron: %s, driver threading %s, idle %s, driver directory %s%n",
                channel, threading, idleName(), dir);
        try {
            run(row, dir.resolve("driver").toString());
        } finally {
            deleteTree(dir);
            Runtime.getRuntime().removeShutdownHook(cleanup);
        }
        row.peakRssBytes = Results.peakRssBytes();
        row.heapCommittedBytes = Results.heapCommittedBytes();
        System.out.println(row.line());
    }

    private static void parse(String[] args, Results.Row row) {
        for (int i = 0; i < args.length; i += 2) {
            if (i + 1 >= args.length) {
                usage("option " + args[i] + " needs a value");
            }
            String v = args[i + 1];
            switch (args[i]) {
                case "--channel": channel = v; break;
                case "--transport": channel = v.replaceFirst("^aeron-", ""); break;
                case "--size": row.size = Integer.parseInt(v); break;
                case "--messages": row.messages = Long.parseLong(v); break;
                case "--threading": threading = v.toLowerCase(Locale.ROOT); break;
                case "--idle": idle = v; break;
                case "--backoff": {
                    String[] p = v.split(",");
                    if (p.length != 4) {
                        usage("--backoff SPINS,YIELDS,MIN_PARK_NS,MAX_PARK_NS");
                    }
                    for (int k = 0; k < 4; k++) {
                        backoff[k] = Long.parseLong(p[k].trim());
                    }
                    break;
                }
                case "--port": port = Integer.parseInt(v); break;
                case "--dir": dirParent = v; break;
                // The rest of Workload's command line, as bench/workloads.sh gives it to every row.
                case "--pattern": if (!v.equals("rtt")) usage("--pattern rtt only"); break;
                case "--threads": if (!v.equals("1")) usage("--threads 1 only (one ping thread)"); break;
                case "--nodes": if (!v.equals("2")) usage("--nodes 2 only (ping and pong)"); break;
                case "--handlers": break;
                default: usage("unknown option " + args[i]);
            }
        }
        if (!channel.matches("udp|ipc") || !threading.matches("shared|shared_network|dedicated")
                || !idle.matches("backoff|yield|spin|sleep") || row.size < 1 || row.messages < 1) {
            usage("bad channel, threading, idle, size or messages");
        }
        if (dirParent == null) {
            // Aeron's own default parent on Linux: memory, not a disk that writeback would flush the logs to.
            dirParent = Files.isDirectory(Paths.get("/dev/shm")) && Files.isWritable(Paths.get("/dev/shm"))
                    ? "/dev/shm" : System.getProperty("java.io.tmpdir");
        }
    }

    private static void usage(String problem) {
        System.err.println("aeron ping-pong: " + problem);
        System.err.println("options: --channel udp|ipc --size BYTES --messages N --threading shared|shared_network|dedicated"
                + " --idle backoff|yield|spin|sleep --backoff SPINS,YIELDS,MIN_PARK_NS,MAX_PARK_NS --port P --dir PARENT");
        System.exit(2);
    }

    /** The idle strategy as the result line shows it (k=v pairs, no commas: it is a CSV column). */
    private static String idleName() {
        if (idle.equals("backoff")) {
            return String.format(Locale.ROOT, "backoff;spins=%d;yields=%d;park_ns=%d-%d",
                    backoff[0], backoff[1], backoff[2], backoff[3]);
        }
        return idle.equals("sleep") ? "sleep;park_ns=1000" : idle;
    }

    /** A new idle strategy each call: they keep state, so no two threads may share one. */
    private static IdleStrategy newIdle() {
        switch (idle) {
            case "yield": return new YieldingIdleStrategy();
            case "spin": return new BusySpinIdleStrategy();
            case "sleep": return new SleepingIdleStrategy(1_000);
            default: return new BackoffIdleStrategy(backoff[0], backoff[1], backoff[2], backoff[3]);
        }
    }

    private static void run(Results.Row row, String driverDir) throws Exception {
        // Terms large enough that a message is never more than 1/8 of one (Aeron's limit), 1 MiB at least.
        int term = Math.max(1 << 20, Integer.highestOneBit(Math.max(1, row.size + 64) * 8 - 1) << 1);
        MediaDriver.Context dc = new MediaDriver.Context()
                .aeronDirectoryName(driverDir)
                .threadingMode(ThreadingMode.valueOf(threading.toUpperCase(Locale.ROOT)))
                .sharedIdleStrategy(newIdle())
                .sharedNetworkIdleStrategy(newIdle())
                .conductorIdleStrategy(newIdle())
                .senderIdleStrategy(newIdle())
                .receiverIdleStrategy(newIdle())
                .publicationTermBufferLength(term)
                .ipcTermBufferLength(term)
                .dirDeleteOnStart(true)
                .dirDeleteOnShutdown(true)
                .warnIfDirectoryExists(false);
        String pingChannel = "aeron:ipc";
        String pongChannel = "aeron:ipc";
        if (channel.equals("udp")) {
            int[] ports = port > 0 ? new int[] {port, port + 1} : freeUdpPorts();
            pingChannel = "aeron:udp?endpoint=localhost:" + ports[0];
            pongChannel = "aeron:udp?endpoint=localhost:" + ports[1];
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        MediaDriver driver = MediaDriver.launchEmbedded(dc);
        Aeron aeron = null;
        Thread pong = null;
        PongLoop echo = null;
        try {
            aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(driver.aeronDirectoryName()));
            ExclusivePublication pingPub = aeron.addExclusivePublication(pingChannel, PING_STREAM);
            Subscription pingSub = aeron.addSubscription(pingChannel, PING_STREAM);
            ExclusivePublication pongPub = aeron.addExclusivePublication(pongChannel, PONG_STREAM);
            Subscription pongSub = aeron.addSubscription(pongChannel, PONG_STREAM);
            echo = new PongLoop(pingSub, pongPub, newIdle());
            pong = new Thread(echo, "aeron-pong");
            pong.setUncaughtExceptionHandler((t, x) -> failure.compareAndSet(null, x));
            pong.start();
            awaitConnected(pingPub, pongSub, failure);
            Ping ping = new Ping(pingPub, pongSub, newIdle(), row.size, failure);
            Results.Row warm = row.copy();
            warm.messages = Math.max(1, Math.min(row.messages / 10, 20_000));
            ping.run(warm, false);
            ping.run(row, true);
        } finally {
            if (echo != null) {
                echo.running = false;
                pong.join(10_000);
                System.err.printf("aeron: pong echoed %d messages%n", echo.echoed);
            }
            if (aeron != null) {
                aeron.close();
            }
            driver.close();
        }
        if (failure.get() != null) {
            throw new IllegalStateException("aeron ping-pong failed", failure.get());
        }
    }

    /** Two UDP ports of localhost that were free a moment ago (the driver binds them next); both held at once, so distinct. */
    private static int[] freeUdpPorts() throws IOException {
        try (DatagramSocket a = new DatagramSocket(0, InetAddress.getLoopbackAddress());
                DatagramSocket b = new DatagramSocket(0, InetAddress.getLoopbackAddress())) {
            return new int[] {a.getLocalPort(), b.getLocalPort()};
        }
    }

    private static void awaitConnected(Publication pub, Subscription sub, AtomicReference<Throwable> failure) {
        long t0 = System.nanoTime();
        while (!pub.isConnected() || !sub.isConnected()) {
            if (failure.get() != null || System.nanoTime() - t0 > STALL_NS) {
                throw new IllegalStateException("ping and pong not connected within 60 s", failure.get());
            }
            Thread.onSpinWait();
            Thread.yield();
        }
    }

    /**
     * Offers {@code length} bytes until the publication takes them; idles while
     * it is back-pressured or between terms, fails when it cannot ever take them.
     */
    static void offer(Publication pub, DirectBuffer buf, int offset, int length, IdleStrategy idler) {
        idler.reset();
        long t0 = System.nanoTime();
        long r;
        while ((r = pub.offer(buf, offset, length)) < 0) {
            if (r == Publication.CLOSED || r == Publication.MAX_POSITION_EXCEEDED) {
                throw new IllegalStateException("publication cannot take messages any more: " + r);
            }
            if (System.nanoTime() - t0 > STALL_NS) {
                throw new IllegalStateException("offer did not succeed in 60 s: " + r);
            }
            idler.idle();
        }
    }

    /** The pong thread: echoes every ping back on the other channel until stopped. */
    private static final class PongLoop implements Runnable {
        private final Subscription in;
        private final Publication out;
        private final IdleStrategy idler;
        /** A second instance: the echo's offer may idle inside a poll of the first. */
        private final IdleStrategy offerIdler = newIdle();
        volatile boolean running = true;
        /** Written by the pong thread only; read once it ended. */
        long echoed;

        PongLoop(Subscription in, Publication out, IdleStrategy idler) {
            this.in = in;
            this.out = out;
            this.idler = idler;
        }

        @Override
        public void run() {
            FragmentHandler whole = (buf, offset, length, header) -> {
                offer(out, buf, offset, length, offerIdler);
                echoed++;
            };
            // Messages longer than the MTU arrive in fragments: echo them whole.
            FragmentAssembler assembler = new FragmentAssembler(whole);
            while (running) {
                idler.idle(in.poll(assembler, 16));
            }
        }
    }

    /** The ping side (the main thread): one message out, its echo back, the time between recorded. */
    private static final class Ping {
        private final Publication out;
        private final Subscription in;
        private final IdleStrategy idler;
        private final UnsafeBuffer payload;
        private final FragmentAssembler assembler;
        private final AtomicReference<Throwable> failure;
        private long answers;

        Ping(Publication out, Subscription in, IdleStrategy idler, int size, AtomicReference<Throwable> failure) {
            this.out = out;
            this.in = in;
            this.idler = idler;
            this.failure = failure;
            this.payload = new UnsafeBuffer(ByteBuffer.allocateDirect(size));
            this.assembler = new FragmentAssembler((buf, offset, length, header) -> answers++);
        }

        void run(Results.Row row, boolean record) {
            Histogram rtts = new Histogram(3_600_000_000_000L, 3);
            IdleStrategy offerIdler = newIdle();
            long cpu0 = Results.processCpuNanos();
            long t0 = System.nanoTime();
            for (long i = 0; i < row.messages; i++) {
                if (payload.capacity() >= Long.BYTES) {
                    payload.putLong(0, i); // a sequence number, for a debugger's eye
                }
                long expected = answers + 1;
                long s = System.nanoTime();
                offer(out, payload, 0, payload.capacity(), offerIdler);
                idler.reset();
                while (answers < expected) {
                    int n = in.poll(assembler, 1);
                    if (n == 0 && (failure.get() != null || System.nanoTime() - s > STALL_NS)) {
                        throw new IllegalStateException("no echo of round trip " + i + " (pong failed, or 60 s passed)",
                                failure.get());
                    }
                    idler.idle(n);
                }
                rtts.recordValue(System.nanoTime() - s);
            }
            long nanos = System.nanoTime() - t0;
            long cpu = Results.processCpuNanos() - cpu0;
            if (record) {
                row.measured(row.messages, nanos, cpu, rtts);
            }
        }
    }

    private static void deleteTree(Path root) {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> s = Files.walk(root)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            System.err.println("aeron: could not delete " + root + ": " + e);
        }
    }
}
