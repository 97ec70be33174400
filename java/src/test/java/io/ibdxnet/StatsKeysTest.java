package io.ibdxnet;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.internal.StatsKeys;
import io.ibdxnet.metrics.NodeMetrics;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The Java side's statistics keys are those {@code io.ibdxnet.internal.StatsKeys}
 * defines: on every transport {@link DXNet#transportStats()} and both MBeans
 * have exactly the documented keys (on ib with the native engine's, read from
 * docs/operations.md's engine table, which the Rust tests hold to the engine's
 * map), and docs/operations.md's "Java counters" tables are generated from them
 * ({@code IBDXNET_UPDATE_DOCS=1} rewrites them).
 */
public class StatsKeysTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    private static final MBeanServer SERVER = ManagementFactory.getPlatformMBeanServer();
    private static final Path DOC = Paths.get("docs/operations.md").toAbsolutePath();
    /** A row of a generated table: its key in backquotes (not the timers' rows, whose names hold * or <). */
    private static final Pattern ROW = Pattern.compile("(?m)^\\| `([a-z0-9_]+)` \\|");

    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    @Test
    public void nioStatisticsHaveExactlyTheDocumentedKeys() throws Exception {
        checkKeysAfterAMessage("nio");
    }

    @Test
    public void loopbackStatisticsHaveExactlyTheDocumentedKeys() throws Exception {
        checkKeysAfterAMessage("loopback");
    }

    @Test
    public void ibStatisticsHaveExactlyTheDocumentedKeysWithTheEngines() throws Exception {
        Set<String> engine = nativeDocumentedKeys();
        assertTrue("the engine's table in docs/operations.md has its keys: " + engine, engine.size() > 20);
        assertEquals("the engine's keys and the core's share only protocol_violations (summed)",
                Collections.singleton("protocol_violations"), intersection(engine, StatsKeys.CORE.names()));
        assertEquals("the engine's keys are not overwritten by the Java side's", Collections.emptySet(),
                intersection(engine, StatsKeys.transportKeys("ib")));
        assertEquals("the JNI layer's keys and the ib transport's", Collections.emptySet(),
                intersection(StatsKeys.IB_JNI.names(), StatsKeys.IB.names()));
        checkKeysAfterAMessage("ib");
    }

    /** Keys are identifiers, each once per group, with a meaning that fits one table row. */
    @Test
    public void eachGroupNamesEachKeyOnceWithAOneLineMeaning() {
        for (StatsKeys.Group g : StatsKeys.GROUPS) {
            assertEquals(g.title + ": no key twice", g.keys.size(), g.names().size());
            for (StatsKeys.Key k : g.keys) {
                assertTrue(g.title + ": " + k.name, k.name.matches("[a-z][a-z0-9_]*"));
                assertTrue(g.title + ": " + k.name + "'s meaning", !k.meaning.isEmpty()
                        && !k.meaning.contains("|") && !k.meaning.contains("\n"));
            }
        }
        // A transport's key that is also a core key would be overwritten in transportStats().
        for (StatsKeys.Group g : new StatsKeys.Group[] {StatsKeys.NODE_MBEAN, StatsKeys.NIO, StatsKeys.LOOPBACK,
            StatsKeys.IB_JNI, StatsKeys.IB}) {
            assertEquals(g.title + " and the core keys", Collections.emptySet(),
                    intersection(g.names(), StatsKeys.CORE.names()));
        }
    }

    /**
     * docs/operations.md's "Java counters" tables are {@code StatsKeys.markdownTables()};
     * {@code IBDXNET_UPDATE_DOCS=1} (or {@code IBDXNET_UPDATE_README=1}, as for the
     * other generated tables) rewrites them instead of failing.
     */
    @Test
    public void docTablesAreGeneratedFromTheKeys() throws IOException {
        String text = new String(Files.readAllBytes(DOC), StandardCharsets.UTF_8);
        String begin = "<!-- java-stats: begin -->\n";
        String end = "<!-- java-stats: end -->";
        int start = text.indexOf(begin);
        assertTrue("docs/operations.md has the marker " + begin.trim(), start >= 0);
        start += begin.length();
        int stop = text.indexOf(end, start);
        assertTrue("docs/operations.md has the marker " + end, stop >= 0);
        String want = StatsKeys.markdownTables();
        if (!text.substring(start, stop).equals(want)) {
            if ("1".equals(System.getenv("IBDXNET_UPDATE_DOCS")) || System.getenv("IBDXNET_UPDATE_README") != null) {
                String updated = text.substring(0, start) + want + text.substring(stop);
                Files.write(DOC, updated.getBytes(StandardCharsets.UTF_8));
                return;
            }
            fail("docs/operations.md's Java counters tables differ from io.ibdxnet.internal.StatsKeys; rerun with "
                    + "IBDXNET_UPDATE_DOCS=1 to regenerate them:\n" + want);
        }
    }

    /**
     * Two nodes over {@code transport} exchange a message; then both nodes'
     * {@code transportStats()} and node 0's MBeans have exactly the documented keys.
     */
    private void checkKeysAfterAMessage(String transport) throws Exception {
        List<DXNet> mesh = TestSupport.mesh(transport, 2, c -> {}, nodes);
        AtomicLong received = new AtomicLong();
        mesh.get(1).register(BytesMessage.class, m -> received.incrementAndGet());
        mesh.get(0).sendMessage(new BytesMessage(1, new byte[64]));
        waitFor("the message arrives", () -> received.get() == 1);

        Set<String> transportKeys = new TreeSet<>(StatsKeys.transportKeys(transport));
        if (transport.equals("ib")) {
            transportKeys.addAll(nativeDocumentedKeys());
        }
        Set<String> stats = new TreeSet<>(transportKeys);
        stats.addAll(StatsKeys.CORE.names());
        for (DXNet n : mesh) {
            assertKeys(transport + " node " + n.nodeId() + ": transportStats()", stats, n.transportStats().keySet());
        }
        Set<String> nodeBean = new TreeSet<>(StatsKeys.CORE.names());
        nodeBean.addAll(StatsKeys.NODE_MBEAN.names());
        assertKeys(transport + ": the Node MBean", nodeBean, attributes(NodeMetrics.name(0, null, 1)));
        assertKeys(transport + ": the transport MBean", transportKeys, attributes(NodeMetrics.name(0, transport, 1)));
    }

    private static void assertKeys(String what, Set<String> documented, Collection<String> actual) {
        Set<String> undocumented = new TreeSet<>(actual);
        undocumented.removeAll(documented);
        Set<String> absent = new TreeSet<>(documented);
        absent.removeAll(actual);
        assertTrue(what + ": keys not in io.ibdxnet.internal.StatsKeys (or the engine's table): " + undocumented
                + "; documented keys it lacks: " + absent, undocumented.isEmpty() && absent.isEmpty());
    }

    private static Set<String> attributes(ObjectName name) throws Exception {
        assertTrue(name + " is registered", SERVER.isRegistered(name));
        Set<String> out = new TreeSet<>();
        for (MBeanAttributeInfo a : SERVER.getMBeanInfo(name).getAttributes()) {
            out.add(a.getName());
        }
        return out;
    }

    /**
     * The keys of the engine's table in docs/operations.md (generated from
     * {@code msgrc/stats.rs} {@code documented_keys()}, and the engine's map has
     * exactly those: {@code docs_stats_table_is_generated},
     * {@code the_statistics_map_has_exactly_the_documented_keys}), and each
     * timer's figures (a row {@code timer_<name>_*} per timer, one row naming
     * the figures; the map has them, 0 unless {@code native.stats_timers=true}).
     */
    static Set<String> nativeDocumentedKeys() throws IOException {
        String text = new String(Files.readAllBytes(DOC), StandardCharsets.UTF_8);
        int start = text.indexOf("<!-- native-stats: begin -->");
        int stop = text.indexOf("<!-- native-stats: end -->");
        assertTrue("docs/operations.md has the engine's table", start >= 0 && stop > start);
        String table = text.substring(start, stop);
        Set<String> out = new TreeSet<>();
        Matcher m = ROW.matcher(table);
        while (m.find()) {
            out.add(m.group(1));
        }
        Matcher figuresRow = Pattern.compile("(?m)^\\| `timer_<name>_<figure>` \\|(.*)$").matcher(table);
        assertTrue("the engine's table names the timers' figures", figuresRow.find());
        List<String> figures = new ArrayList<>();
        Matcher f = Pattern.compile("`([a-z0-9_]+)`").matcher(figuresRow.group(1));
        while (f.find()) {
            figures.add(f.group(1));
        }
        Matcher timer = Pattern.compile("(?m)^\\| `timer_([a-z0-9_]+)_\\*` \\|").matcher(table);
        int timers = 0;
        while (timer.find()) {
            timers++;
            for (String figure : figures) {
                out.add("timer_" + timer.group(1) + "_" + figure);
            }
        }
        assertTrue("timers " + timers + ", figures " + figures, timers > 0 && figures.size() > 3);
        return out;
    }

    private static Set<String> intersection(Set<String> a, Set<String> b) {
        Set<String> out = new TreeSet<>(a);
        out.retainAll(b);
        return out;
    }
}
