package io.ibdxnet.bench;

import java.lang.management.ManagementFactory;
import java.util.Locale;
import org.HdrHistogram.Histogram;

/** The result line every end-to-end benchmark prints (bench/workloads.sh collects them). */
final class Results {
    private Results() {}

    /** CPU time of the whole process (all threads, the engine's native ones too), ns. */
    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
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
        /** 1: all nodes in this JVM; 2: a receiver process of its own (Workload --processes 2). */
        int processes = 1;
        /** The engine settings given with --native, as {@code k=v;k=v}, or "-". */
        String nativeSettings = "-";
        long total;
        double seconds;
        double cpuNanosPerMessage;
        Histogram rtt;
        /** Milliseconds from starting the nodes until every node had delivered a message to every other; -1: not measured. */
        long meshMs = -1;

        Row copy() {
            Row r = new Row();
            r.impl = impl;
            r.pattern = pattern;
            r.nodes = nodes;
            r.size = size;
            r.senders = senders;
            r.handlers = handlers;
            r.messages = messages;
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

        String line() {
            double rate = total / seconds;
            return String.format(Locale.ROOT,
                    "RESULT impl=%s pattern=%s nodes=%d size=%d senders=%d handlers=%d messages=%d seconds=%.4f"
                            + " msg_per_s=%.0f mb_per_s=%.2f cpu_ns_per_msg=%.0f rtt_avg_us=%s rtt_p50_us=%s"
                            + " rtt_p95_us=%s rtt_p99_us=%s rtt_p999_us=%s processes=%d native=%s mesh_ms=%s",
                    impl, pattern, nodes, size, senders, handlers, total, seconds, rate, rate * size / 1e6,
                    cpuNanosPerMessage, rtt == null ? "-" : String.format(Locale.ROOT, "%.2f", rtt.getMean() / 1e3),
                    us(rtt, 50), us(rtt, 95), us(rtt, 99), us(rtt, 99.9), processes, nativeSettings,
                    meshMs < 0 ? "-" : Long.toString(meshMs));
        }
    }
}
