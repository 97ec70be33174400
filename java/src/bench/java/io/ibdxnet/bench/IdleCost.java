package io.ibdxnet.bench;

import io.ibdxnet.DXNet;
import io.ibdxnet.app.BytesRequest;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * {@code --pattern idle}: what connected nodes in this JVM ({@code --nodes},
 * at least two) cost while nothing is sent. Starts them, connects every pair
 * both ways with one request each, waits {@code --settle-ms} (past the engine's parking thresholds),
 * then measures the CPU time of every thread over {@code --seconds} and
 * prints one {@code IDLE key=value ...} line: the total in ms and as % of one
 * core, and the busiest threads by name. It reads /proc/self/task, which sees
 * every thread — the JVM's own, Java's and the engine's native ones — where
 * ThreadMXBean would miss the JVM's internal threads, and schedstat in ns,
 * where the process CPU time ({@link Results#processCpuNanos}, also printed
 * as {@code process_cpu_ms}) counts 10 ms clock ticks. A thread that ends
 * within the window is in {@code process_cpu_ms} only. {@code --transport
 * none} measures a JVM without nodes, the floor under the others. The line
 * ends with the resident set ({@code VmRSS}, MiB) once the nodes are started
 * and once they are connected and settled, and their difference per
 * connection endpoint ({@code nodes × (nodes - 1)} of them), bytes: an upper
 * bound of what an idle endpoint keeps resident, since the difference also
 * holds what connecting brought to the heap and the JIT.
 */
final class IdleCost {
    private IdleCost() {}

    static void run(WorkloadOptions o) throws Exception {
        Results.Row row = o.row;
        List<DXNet> nodes = new ArrayList<>();
        long rssStarted = Results.rssBytes();
        try {
            if (!row.impl.equals("none")) {
                int count = Math.max(2, row.nodes);
                for (int id = 0; id < count; id++) {
                    nodes.add(o.startNode(id, "127.0.0.1:0", m -> {}));
                }
                rssStarted = Results.rssBytes();
                for (DXNet a : nodes) {
                    for (DXNet b : nodes) {
                        if (a != b) {
                            a.addNode(b.nodeId(), "127.0.0.1:" + b.localPort());
                        }
                    }
                }
                for (DXNet a : nodes) {
                    for (DXNet b : nodes) {
                        if (a != b) {
                            a.sendSync(new BytesRequest(b.nodeId(), new byte[8]), 60_000);
                        }
                    }
                }
            }
            // Our own reading code loaded and run once, so that the window sees none of that.
            busiest(threadNanos(), threadNanos(), 1);
            Thread.sleep(o.settleMs);
            long rssConnected = Results.rssBytes();
            long endpoints = (long) nodes.size() * Math.max(0, nodes.size() - 1);
            Map<Integer, long[]> before = threadNanos();
            long cpu0 = Results.processCpuNanos();
            long t0 = System.nanoTime();
            Thread.sleep((long) (o.seconds * 1000));
            Map<Integer, long[]> after = threadNanos();
            long wall = System.nanoTime() - t0;
            long process = Results.processCpuNanos() - cpu0;
            long cpu = 0;
            for (Map.Entry<Integer, long[]> e : after.entrySet()) {
                long[] b = before.get(e.getKey());
                cpu += e.getValue()[0] - (b == null ? 0 : b[0]);
            }
            System.out.println(String.format(Locale.ROOT,
                    "IDLE impl=%s native=%s seconds=%.2f cpu_ms=%.1f cpu_pct_core=%.2f process_cpu_ms=%.0f threads=%s"
                            + " rss_started_mb=%.1f rss_connected_mb=%.1f endpoints=%d rss_bytes_per_endpoint=%s",
                    row.impl, row.nativeSettings, wall / 1e9, cpu / 1e6, 100.0 * cpu / wall, process / 1e6,
                    busiest(before, after, wall), rssStarted / (double) (1 << 20), rssConnected / (double) (1 << 20),
                    endpoints, endpoints == 0 || rssStarted < 0 || rssConnected < 0 ? "-"
                            : Long.toString((rssConnected - rssStarted) / endpoints)));
        } finally {
            for (DXNet n : nodes) {
                n.close();
            }
        }
    }

    /**
     * The threads that used at least 0.05 % of a core, busiest first, as
     * {@code name*count:percent} joined by ';' (threads of one name summed;
     * Linux keeps 15 characters of a name, so both nodes' engine threads of
     * one role share a name). Threads gone before the end are in the total only.
     */
    private static String busiest(Map<Integer, long[]> before, Map<Integer, long[]> after, long wall) throws IOException {
        Map<String, long[]> byName = new TreeMap<>(); // name → {ns, threads}
        for (Map.Entry<Integer, long[]> e : after.entrySet()) {
            long[] b = before.get(e.getKey());
            long ns = e.getValue()[0] - (b == null ? 0 : b[0]);
            String name = comm(e.getKey());
            long[] sum = byName.computeIfAbsent(name, k -> new long[2]);
            sum[0] += ns;
            sum[1]++;
        }
        List<Map.Entry<String, long[]>> sorted = new ArrayList<>(byName.entrySet());
        sorted.sort((x, y) -> Long.compare(y.getValue()[0], x.getValue()[0]));
        StringBuilder s = new StringBuilder();
        for (Map.Entry<String, long[]> e : sorted) {
            double pct = 100.0 * e.getValue()[0] / wall;
            if (pct < 0.05) {
                break;
            }
            s.append(s.length() == 0 ? "" : ";").append(e.getKey()).append('*').append(e.getValue()[1])
                    .append(String.format(Locale.ROOT, ":%.2f", pct));
        }
        return s.length() == 0 ? "-" : s.toString();
    }

    /** Every thread of this process: tid → {CPU time ns}. */
    private static Map<Integer, long[]> threadNanos() throws IOException {
        Map<Integer, long[]> m = new HashMap<>();
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (Path t : tasks) {
                try {
                    // schedstat's first field: time on a CPU, ns (stat's utime/stime would give 10 ms ticks).
                    String s = new String(Files.readAllBytes(t.resolve("schedstat")), StandardCharsets.US_ASCII);
                    m.put(Integer.parseInt(t.getFileName().toString()), new long[] {Long.parseLong(s.split(" ")[0].trim())});
                } catch (IOException e) {
                    // the thread ended while we looked
                }
            }
        }
        return m;
    }

    /** The thread's name as the kernel has it, made safe for a CSV field. */
    private static String comm(int tid) {
        try {
            String n = new String(Files.readAllBytes(Paths.get("/proc/self/task/" + tid + "/comm")), StandardCharsets.UTF_8);
            return n.trim().replaceAll("[^A-Za-z0-9_.#-]", "_");
        } catch (IOException e) {
            return "gone";
        }
    }
}
