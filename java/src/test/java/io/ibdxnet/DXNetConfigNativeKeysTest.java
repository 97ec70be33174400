package io.ibdxnet;

import static io.ibdxnet.ConfigTestSupport.refusal;
import static io.ibdxnet.ConfigTestSupport.write;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.internal.Transports;
import java.nio.file.Path;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The native engine's keys ({@code native.*}): checked by name and value
 * whatever the transport, set by the Java key that overlaps them (a
 * contradiction is refused naming both), and their errors name the file and
 * the key as the user wrote it.
 */
public class DXNetConfigNativeKeysTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    /** native.* keys on nio are checked by name and reported as unused, not dropped silently (issue 21, bug 4). */
    /** Values too, not only names: the engine's parser checks them on nio and loopback as it would on ib. */
    @Test
    public void badNativeValuesAreRefusedWhateverTheTransport() throws Exception {
        String[][] cases = {{"sq_size", "abc", "native.sq_size"}, {"sq_size", "0", "native.sq_size"},
            {"signal_interval", "4096", "native.signal_interval"}};
        for (String transport : new String[] {"nio", "loopback"}) {
            for (String[] c : cases) {
                DXNetConfig config = new DXNetConfig(0);
                config.transport = transport;
                config.listen = "127.0.0.1:0";
                config.nativeConfig.put("sq_size", "256");
                config.nativeConfig.put(c[0], c[1]);
                String e = refusal(transport + ": native." + c[0] + " = " + c[1], () -> DXNet.start(config).close());
                assertTrue(transport + ": " + e, e.contains(c[2]));
            }
        }
    }

    @Test
    public void nativeKeysOnNioAreCheckedAndReported() throws Exception {
        DXNetConfig c = new DXNetConfig(0);
        c.transport = "nio";
        c.listen = "127.0.0.1:0";
        c.nativeConfig.put("sq_sise", "64");
        String e = refusal("a misspelt native key on nio", () -> DXNet.start(c).close());
        assertTrue(e, e.contains("native.sq_sise") && e.contains("sq_size"));
        c.nativeConfig.clear();
        c.nativeConfig.put("sq_size", "64");
        java.util.List<String> logged = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.logging.Logger log = java.util.logging.Logger.getLogger("io.ibdxnet.Transports");
        java.util.logging.Handler h = new java.util.logging.Handler() {
            @Override
            public void publish(java.util.logging.LogRecord r) {
                logged.add(r.getLevel() + " " + r.getMessage());
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
        };
        log.addHandler(h);
        try (DXNet n = DXNet.start(c)) {
            assertEquals(0, n.nodeId());
            assertTrue(logged.toString(), logged.stream().anyMatch(m -> m.startsWith("WARNING") && m.contains("native.sq_size")));
        } finally {
            log.removeHandler(h);
        }
    }

    /**
     * The native keys are checked once, as the ib transport's settings
     * ({@code IbSettings}), whichever transport the node uses: a misspelt one
     * from a file fails the start on nio, and on auto where it resolves to nio
     * (no RDMA device here), with the file and the engine's wording, without
     * asking the native library.
     */
    @Test
    public void aBadNativeKeyIsReportedWhateverTheTransport() throws Exception {
        for (String transport : new String[] {"nio", "auto", "loopback"}) {
            Path f = write(transport + "-native.conf", "nodeId=1\ntransport=" + transport + "\nlisten=127.0.0.1:0\nnative.sq_sise=8\n");
            String e = refusal("native.sq_sise on " + transport, () -> DXNet.start(f).close());
            assertEquals(transport, f + ": unknown configuration key 'native.sq_sise' (did you mean 'native.sq_size'?)", e);
        }
        DXNetConfig c = new DXNetConfig(1);
        c.transport = "nio";
        c.nativeConfig.put("flow_control_unit", "64");
        String e = refusal("flow_control_unit on nio", () -> Transports.ibSettings(c, "127.0.0.1:0"));
        assertTrue(e, e.startsWith("native.flow_control_unit = '64' contradicts"));
    }

    /** A Java key sets its native key; a native key contradicting it is an error naming both. */
    @Test
    public void overlappingNativeKeysComeFromTheJavaKeyAndContradictionsAreRefused() throws Exception {
        DXNetConfig c = new DXNetConfig(2);
        c.connectTimeoutMs = 2_000;
        c.maxConnections = 7;
        c.authKeyFile = "/k";
        c.nodes.put(3, "10.0.0.3:5730");
        Map<String, String> n = c.nativeSettings("0.0.0.0:5730");
        assertEquals("2", n.get("node_id"));
        assertEquals("2000", n.get("connect_timeout_ms"));
        assertEquals("7", n.get("max_connections"));
        assertEquals("/k", n.get("auth_key_file"));
        assertEquals("0.0.0.0:5730", n.get("listen"));
        assertEquals("10.0.0.3:5730", n.get("node.3"));
        c.listen = "127.0.0.1:9";
        assertEquals("127.0.0.1:9", c.nativeSettings("0.0.0.0:5730").get("listen"));
        // The same value twice is no contradiction; a native key alone (Java key at its default) is used.
        c.nativeConfig.put("max_connections", "7");
        c.nativeSettings(null);
        DXNetConfig d = new DXNetConfig(2);
        d.nativeConfig.put("connect_timeout_ms", "500");
        assertEquals("500", d.nativeSettings(null).get("connect_timeout_ms"));
        // Contradictions, programmatic and from a file (even with the Java key at its default value).
        c.nativeConfig.put("connect_timeout_ms", "5000");
        String e = refusal("contradiction", c::validate);
        assertEquals("connectTimeoutMs = '2000' and native.connect_timeout_ms = '5000' contradict each other: "
                + "connectTimeoutMs sets native.connect_timeout_ms; give only connectTimeoutMs", e);
        Path f = write("both.conf", "nodeId=1\ntransport=loopback\nmaxConnections=100\nnative.max_connections=50\n");
        e = refusal("contradiction in a file", () -> DXNetConfig.load(f).validate());
        assertTrue(e, e.startsWith(f + ": maxConnections = '100' and native.max_connections = '50'"));
        DXNetConfig g = new DXNetConfig(4);
        g.nativeConfig.put("node_id", "5");
        e = refusal("node id twice", g::validate);
        assertTrue(e, e.contains("nodeId = '4'") && e.contains("native.node_id = '5'"));
        DXNetConfig h = new DXNetConfig(4);
        h.listen = "127.0.0.1:1";
        h.nativeConfig.put("listen", "127.0.0.1:2");
        e = refusal("listen twice", h::validate);
        assertTrue(e, e.contains("listen = '127.0.0.1:1'") && e.contains("native.listen = '127.0.0.1:2'"));
    }

    /**
     * A native key the engine refuses, from line 3 of a file: the error names
     * the file and the key as the user wrote it ({@code native.sq_size}), not
     * a line of the text Java builds for the engine.
     */
    @Test
    public void nativeErrorsNameTheFileAndTheNativeKey() throws Exception {
        Path f = write("ib.conf", "nodeId=1\ntransport=ib\nnative.sq_size=abc\nnative.fabric=sim\nnative.listen=127.0.0.1:0\n");
        String e = refusal("native.sq_size=abc", () -> DXNet.start(f).close());
        assertEquals(f + ": native.sq_size = 'abc': not a non-negative integer (invalid digit found in string)", e);
        Path g = write("ib2.conf", "nodeId=1\ntransport=ib\nnative.fabric=sim\nnative.listen=127.0.0.1:0\nnative.sq_size=8\n"
                + "native.signal_interval=9\n");
        e = refusal("signal_interval > sq_size", () -> DXNet.start(g).close());
        assertEquals(g + ": native.signal_interval = 9 must be at most native.sq_size = 8", e);
        Path h = write("ib3.conf", "nodeId=1\ntransport=ib\nnative.fabric=sim\nnative.sq_sise=8\n");
        e = refusal("native.sq_sise", () -> DXNet.start(h).close());
        assertTrue(e, e.startsWith(h + ": unknown configuration key 'native.sq_sise' (did you mean 'native.sq_size'?)"));
    }
}
