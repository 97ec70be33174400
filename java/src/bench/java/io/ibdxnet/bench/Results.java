package io.ibdxnet.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Locale;
import org.HdrHistogram.Histogram;

/** The result line every end-to-end benchmark prints (bench/workloads.sh collects them). */
final class Results {
    private Results() {}

    /** CPU time of the whole process (all threads, the engine's native ones too), ns. */
    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    /**
     * The peak resident set of this process so far ({@code VmHWM} of
     * {@code /proc/self/status}), bytes; -1 where there is none.
     */
    static long peakRssBytes() {
        return status("VmHWM:");
    }

    /** The Java heap committed now (the collector's share of the resident set at most), bytes. */
    static long heapCommittedBytes() {
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getCommitted();
    }

    /** The resident set of this process now ({@code VmRSS}), bytes; -1 where there is none. */
    static long rssBytes() {
        return status("VmRSS:");
    }

    /** A {@code kB} field of {@code /proc/self/status}, bytes; -1 where there is none. */
    private static long status(String field) {
        try {
            for (String l : Files.readAllLines(Paths.get("/proc/self/status"), StandardCharsets.UTF_8)) {
                if (l.startsWith(field)) {
                    // "VmHWM:     123456 kB"
                    return Long.parseLong(l.substring(field.length()).replace("kB", "").trim()) * 1024;
                }
            }
        } catch (IOException | NumberFormatException e) {
            // not Linux, or a format we do not know: not measured
        }
        return -1;
    }

    /** One measurement. */
    static final class Row {
        String impl = "ib";
        String pattern = "uni";
        int nodes = 2;
        int size = 64;
        int senders = 1;
        int handlers = 1;
        long messages = 100_000;
        /** 1: all nodes in this JVM; N > 1: one node per process (Workload --processes N, {@link Processes}). */
        int processes = 1;
        /** rtt: the pause after each round trip, µs (--gap-us; 0: none). */
        long gapUs;
        /** all: the destinations of each sender, the nodes after its own (--fanout; 0: every other node). */
        int fanout;
        /** all: how many nodes send, the first by id (--active; 0: every node). */
        int active;
        /** The engine settings given with --native, as {@code k=v;k=v}, or "-". */
        String nativeSettings = "-";
        long total;
        double seconds;
        double cpuNanosPerMessage;
        Histogram rtt;
        /** Milliseconds from starting the nodes until every node had delivered a message to every other; -1: not measured. */
        long meshMs = -1;
        /** The peak resident sets ({@code VmHWM}) of every process of the run, summed, bytes; -1: not measured. */
        long peakRssBytes = -1;
        /**
         * Memory of one connection endpoint, bytes: ib the engine's {@code bytes_per_connection}
         * (its registered send ring), nio and loopback the outgoing ring's resident bytes
         * (all of {@code nioRingSize} in direct memory; see {@code Workload.bytesPerConnection});
         * -1: not accounted.
         */
        long bytesPerConnection = -1;
        /** The Java heap committed at the end of the run in every process of it, summed, bytes; -1: not measured. */
        long heapCommittedBytes = -1;

        Row copy() {
            Row r = new Row();
            r.impl = impl;
            r.pattern = pattern;
            r.nodes = nodes;
            r.size = size;
            r.senders = senders;
            r.handlers = handlers;
            r.messages = messages;
            r.gapUs = gapUs;
            r.fanout = fanout;
            r.active = active;
            r.processes = processes;
            r.nativeSettings = nativeSettings;
            return r;
        }

        void measured(long messagesDelivered, long nanos, long cpuNanos, Histogram rtts) {
            total = messagesDelivered;
            seconds = nanos / 1e9;
            cpuNanosPerMessage = (double) cpuNanos / messagesDelivered;
            rtt = rtts;
        }

        private static String us(Histogram h, double percentile) {
            return h == null ? "-" : String.format(Locale.ROOT, "%.2f", h.getValueAtPercentile(percentile) / 1e3);
        }

        private static String mib(long bytes) {
            return bytes < 0 ? "-" : String.format(Locale.ROOT, "%.1f", bytes / (double) (1 << 20));
        }

        /** The result line; {@code peak_rss_mb} and {@code heap_committed_mb} are in MiB (2^20 bytes), {@code mb_per_s} in 10^6 bytes/s. */
        String line() {
            double rate = total / seconds;
            return String.format(Locale.ROOT,
                    "RESULT impl=%s pattern=%s nodes=%d size=%d senders=%d handlers=%d messages=%d seconds=%.4f"
                            + " msg_per_s=%.0f mb_per_s=%.2f cpu_ns_per_msg=%.0f rtt_avg_us=%s rtt_p50_us=%s"
                            + " rtt_p95_us=%s rtt_p99_us=%s rtt_p999_us=%s processes=%d native=%s mesh_ms=%s peak_rss_mb=%s"
                            + " bytes_per_connection=%s heap_committed_mb=%s gap_us=%d fanout=%d active=%d",
                    impl, pattern, nodes, size, senders, handlers, total, seconds, rate, rate * size / 1e6,
                    cpuNanosPerMessage, rtt == null ? "-" : String.format(Locale.ROOT, "%.2f", rtt.getMean() / 1e3),
                    us(rtt, 50), us(rtt, 95), us(rtt, 99), us(rtt, 99.9), processes, nativeSettings,
                    meshMs < 0 ? "-" : Long.toString(meshMs),
                    mib(peakRssBytes),
                    bytesPerConnection < 0 ? "-" : Long.toString(bytesPerConnection), mib(heapCommittedBytes), gapUs, fanout, active);
        }
    }
}
