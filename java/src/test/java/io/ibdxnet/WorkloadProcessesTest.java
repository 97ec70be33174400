package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The bench's {@code Workload} (java/src/bench, run as bench/workloads.sh
 * runs it) with several processes and with many nodes in one JVM: every node
 * got every message of every other, and the result line carries the fields
 * the scale suite plots ({@code mesh_ms}, {@code peak_rss_mb},
 * {@code bytes_per_connection}).
 */
public class WorkloadProcessesTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    private static final int MESSAGES = 600;

    private static ChildJvm.Result workload(String... args) throws Exception {
        String cp = System.getProperty("test.benchClasspath");
        assertNotNull("test.benchClasspath (build.gradle) names the bench classes", cp);
        List<String> cmd = ChildJvm.command("io.ibdxnet.bench.Workload", cp, List.of("-Xms64m", "-Xmx256m"),
                List.of(args));
        return ChildJvm.run(cmd, Map.of(), 60_000);
    }

    /** Bytes free in the tmpfs of {@code dir}; -1 if it is none (checked here, not with the code under test). */
    private static long tmpfsRoom(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            return -1;
        }
        FileStore store = Files.getFileStore(dir);
        return store.type().equals("tmpfs") ? store.getUsableSpace() : -1;
    }

    private static String field(String line, String key) {
        Matcher m = Pattern.compile(" " + key + "=(\\S+)").matcher(line);
        assertTrue(key + " in " + line, m.find());
        return m.group(1);
    }

    private static String resultLine(ChildJvm.Result r) {
        Matcher m = Pattern.compile("(?m)^RESULT .*$").matcher(r.output);
        assertTrue("a RESULT line: " + r.output, m.find());
        return m.group();
    }

    @Test
    public void allToAllOverNioInThreeProcessesDeliversEveryMessageOfEveryNode() throws Exception {
        ChildJvm.Result r = workload("--transport", "nio", "--pattern", "all", "--processes", "3", "--size", "64",
                "--messages", Integer.toString(MESSAGES));
        assertEquals(r.output, 0, r.exit);
        String line = resultLine(r);
        assertEquals(line, "3", field(line, "processes"));
        assertEquals(line, "3", field(line, "nodes"));
        // Each of the 3 nodes sends MESSAGES, alternating between the other two.
        assertEquals(line, Integer.toString(3 * MESSAGES), field(line, "messages"));
        assertTrue(line, Long.parseLong(field(line, "mesh_ms")) > 0);
        assertTrue(line, Double.parseDouble(field(line, "cpu_ns_per_msg")) > 0);
        // Three JVMs, each with at least its heap's first pages and a node: more than one JVM's 30 MiB.
        assertTrue(line, Double.parseDouble(field(line, "peak_rss_mb")) > 3 * 30);
        assertTrue(line, Double.parseDouble(field(line, "heap_committed_mb")) > 3 * 1);
        // The outgoing rings' resident bytes per connection follow use on every JDK: the children run
        // from class directories (no Pages), so a ring is a file in /dev/shm, committed only as far as
        // it was written (about 330 records of 64 bytes: 32 KiB on JDK 17); direct memory, resident in
        // full, only without a tmpfs with room for a process's two rings.
        long perConnection = Long.parseLong(field(line, "bytes_per_connection"));
        int ringSize = new DXNetConfig(0).nioRingSize;
        if (tmpfsRoom(Paths.get("/dev/shm")) >= 2L * ringSize) {
            assertTrue("rings resident far beyond what was written (nioRingSize " + ringSize + "): " + line,
                    perConnection >= 0 && perConnection <= ringSize / 16);
        } else {
            assertEquals("no tmpfs for file rings: direct memory, resident in full: " + line, ringSize, perConnection);
        }
        // Every node from every other: the mesh's one message, then half of the
        // warm-up's (MESSAGES / 10) and half of the measured run's.
        long each = 1 + MESSAGES / 10 / 2 + MESSAGES / 2;
        List<String> seen = new ArrayList<>();
        Matcher m = Pattern.compile("(?m)^RECEIVED node=(\\d) (\\d)=(\\d+) (\\d)=(\\d+)$").matcher(r.output);
        while (m.find()) {
            seen.add(m.group(1));
            assertEquals(m.group(), each, Long.parseLong(m.group(3)));
            assertEquals(m.group(), each, Long.parseLong(m.group(5)));
        }
        seen.sort(null);
        assertEquals(r.output, List.of("0", "1", "2"), seen);
    }

    @Test
    public void allToAllOverIbInOneJvmReportsTheEnginesMemoryPerConnection() throws Exception {
        ChildJvm.Result r = workload("--transport", "ib", "--fabric", "sim", "--pattern", "all", "--nodes", "3",
                "--size", "64", "--messages", Integer.toString(MESSAGES), "--native", "send_ring_size=262144");
        assertEquals(r.output, 0, r.exit);
        String line = resultLine(r);
        assertEquals(line, "1", field(line, "processes"));
        assertEquals(line, Integer.toString(3 * MESSAGES), field(line, "messages"));
        assertTrue(line, Long.parseLong(field(line, "mesh_ms")) > 0);
        assertTrue(line, Double.parseDouble(field(line, "peak_rss_mb")) > 30);
        // The engine's bytes_per_connection stat: the send ring it was given.
        assertEquals(line, "262144", field(line, "bytes_per_connection"));
    }
}
