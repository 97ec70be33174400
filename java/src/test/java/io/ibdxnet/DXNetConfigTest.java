package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.internal.Transports;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

public class DXNetConfigTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static Path write(String name, String text) throws Exception {
        Path dir = Files.createTempDirectory("dxnet-config");
        Path f = dir.resolve(name);
        Files.write(f, text.getBytes(StandardCharsets.UTF_8));
        return f;
    }

    /** The message of the IllegalArgumentException {@code r} throws. */
    private static String refusal(String what, ThrowingRunnable r) throws Exception {
        try {
            r.run();
        } catch (IllegalArgumentException e) {
            return e.getMessage();
        }
        fail(what + " was accepted");
        return null;
    }

    private interface ThrowingRunnable {
        void run() throws Exception;
    }

    @Test
    public void jsonAndPropertiesGiveTheSameConfig() throws Exception {
        DXNetConfig j = DXNetConfig.load(write("n.json",
                "{\"nodeId\": 3, \"handlerThreads\": 4, \"flowControlThreshold\": 0.25,"
                        + " \"nodes\": {\"1\": \"10.0.0.1:5730\", \"2\": \"node2:5731\"},"
                        + " \"native\": {\"fabric\": \"sim\", \"sq_size\": 32}}"));
        DXNetConfig p = DXNetConfig.load(write("n.conf",
                "nodeId=3\nhandlerThreads=4\nflowControlThreshold=0.25\nnode.1=10.0.0.1:5730\nnode.2=node2:5731\n"
                        + "native.fabric=sim\nnative.sq_size=32\n"));
        for (DXNetConfig c : new DXNetConfig[] {j, p}) {
            assertEquals(3, c.nodeId);
            assertEquals(4, c.handlerThreads);
            assertEquals(0.25, c.flowControlThreshold, 0.0);
            assertEquals("node2:5731", c.nodes.get(2));
            assertEquals("32", c.nativeConfig.get("sq_size"));
            c.validate();
        }
    }

    @Test
    public void defaultsAreTheTablesAndValid() {
        DXNetConfig c = new DXNetConfig(7);
        assertEquals(7, c.nodeId);
        for (ConfigKey k : DXNetConfig.KEYS) {
            if (!k.name.equals("nodeId")) {
                assertEquals(k.name, k.defaultText, k.text(c));
            }
        }
        assertEquals(100, c.maxConnections);
        assertEquals("auto", c.transport);
        assertNull(c.listen);
        c.validate();
        // The nio transport's settings are the configuration's, not a second set of defaults.
        io.ibdxnet.nio.NioSettings s = Transports.nioSettings(c);
        assertEquals(c.nioRingSize, s.ringSize);
        assertEquals(c.idleTimeoutMs, s.idleTimeoutMs);
        assertEquals(c.flowControlWindow, s.flowControlWindow);
        assertEquals(c.checkPeerAddress, s.checkPeerAddress);
        assertEquals(c.helloTimeoutMs, s.helloTimeoutMs);
    }

    @Test
    public void errorsNameTheFileAndKey() throws Exception {
        String e = refusal("unknown key", () -> DXNetConfig.load(write("bad.json", "{\"nodeId\": 1, \"handlerThreadz\": 2}")));
        assertTrue(e, e.contains("bad.json") && e.contains("'handlerThreadz'") && e.contains("did you mean 'handlerThreads'"));
        e = refusal("bad number", () -> DXNetConfig.load(write("bad.conf", "nodeId=1\nhandlerThreads=two\n")));
        assertTrue(e, e.contains("bad.conf") && e.contains("handlerThreads = 'two'"));
        e = refusal("broken JSON", () -> DXNetConfig.load(write("broken.json", "{nodeId")));
        assertTrue(e, e.contains("broken.json"));
        e = refusal("a JSON array", () -> DXNetConfig.load(write("array.json", "[1]")));
        assertTrue(e, e.contains("array.json"));
        e = refusal("nested value", () -> DXNetConfig.load(write("nested.json", "{\"nodeId\": 1, \"listen\": {\"a\": 1}}")));
        assertTrue(e, e.contains("nested.json") && e.contains("listen"));
        e = refusal("nodes not an object", () -> DXNetConfig.load(write("nodes.json", "{\"nodeId\": 1, \"nodes\": 3}")));
        assertTrue(e, e.contains("nodes.json") && e.contains("nodes"));
        // No nodeId: the default, 0 (oneNodeTableFileServesEveryNode), no longer a refusal.
        assertEquals(0, DXNetConfig.load(write("empty.conf", "handlerThreads=3\n")).nodeId);
        e = refusal("bad node id", () -> DXNetConfig.load(write("node.conf", "nodeId=1\nnode.x=h:1\n")));
        assertTrue(e, e.contains("node.conf") && e.contains("node.x"));
        // Out of range: found by validate, which names the file too.
        DXNetConfig c = DXNetConfig.load(write("range.conf", "nodeId=1\nkeepAliveMs=0\n"));
        e = refusal("keepAliveMs = 0", c::validate);
        assertTrue(e, e.startsWith(c.source() + ": keepAliveMs = 0 must be in [1, "));
    }

    /** Values of the wrong type for each key. */
    private static final Map<String, List<String>> WRONG_TYPE = new LinkedHashMap<>();
    /** Values out of range for each key (refused by {@link DXNetConfig#validate}). */
    private static final Map<String, List<String>> OUT_OF_RANGE = new LinkedHashMap<>();

    private static void cases(String key, List<String> wrongType, List<String> outOfRange) {
        WRONG_TYPE.put(key, wrongType);
        OUT_OF_RANGE.put(key, outOfRange);
    }

    static {
        List<String> none = Arrays.asList();
        cases("nodeId", Arrays.asList("x", "1.5"), Arrays.asList("-1", "65535"));
        cases("transport", none, Arrays.asList("tcp", "IB"));
        cases("listen", none, Arrays.asList("nohost", "h:port", "h:65536"));
        cases("maxConnections", Arrays.asList("many", "1e3"), Arrays.asList("0", "65535"));
        cases("handlerThreads", Arrays.asList("two"), Arrays.asList("0", "1025"));
        cases("orderPerSender", Arrays.asList("yes", "1"), none);
        cases("receiveInline", Arrays.asList("no", "0"), none);
        cases("handleOnReceivingThread", Arrays.asList("on", "T"), none);
        cases("handlerQueueSize", Arrays.asList("2147483648"), Arrays.asList("0"));
        cases("handlerQueueBytes", Arrays.asList("64M"), Arrays.asList("1023", "1099511627777"));
        cases("handlerQueueBytesPerSource", Arrays.asList("8 MiB"), Arrays.asList("0"));
        cases("handlerSendTimeoutMs", Arrays.asList("1s"), Arrays.asList("0", "86400001"));
        cases("maxDeferredBytesPerNode", Arrays.asList("lots"), Arrays.asList("-1", "1099511627777"));
        cases("ibqMaxBuffersPerSource", Arrays.asList("1k"), Arrays.asList("0", "1048577"));
        cases("ibqMaxBytesPerSource", Arrays.asList("x"), Arrays.asList("0"));
        cases("requestTimeoutMs", Arrays.asList("10s"), Arrays.asList("0", "86400001"));
        cases("statsIntervalMs", Arrays.asList("often"), Arrays.asList("-1", "3600001"));
        cases("sendTimeoutMs", Arrays.asList("soon"), Arrays.asList("-1", "86400001"));
        cases("connectTimeoutMs", Arrays.asList("1.0"), Arrays.asList("0", "86400001"));
        cases("helloTimeoutMs", Arrays.asList("2s"), Arrays.asList("0", "86400001"));
        cases("flowControlWindow", Arrays.asList("16M"), Arrays.asList("4095"));
        cases("flowControlThreshold", Arrays.asList("half"), Arrays.asList("0", "1.5", "NaN"));
        cases("ibqMaxBuffers", Arrays.asList("lots"), Arrays.asList("0", "1048577", "2147483647"));
        cases("ibqMaxBytes", Arrays.asList("1 MB"), Arrays.asList("0"));
        cases("nioBufferSize", Arrays.asList("64k"), Arrays.asList("4095", "67108865", "2147483647"));
        cases("nioBufferCount", Arrays.asList("x"), Arrays.asList("1", "1048577", "2147483647"));
        cases("nioRingSize", Arrays.asList("4M"), Arrays.asList("4096", "12288", "2147483647"));
        cases("keepAliveMs", Arrays.asList("1s"), Arrays.asList("0", "86400001"));
        cases("idleTimeoutMs", Arrays.asList("10s"), Arrays.asList("1", "86400001"));
        cases("maxMessageSize", Arrays.asList("64MiB"), Arrays.asList("1023"));
        cases("maxUnfinishedBytesPerConnection", Arrays.asList("x"), Arrays.asList("1023"));
        cases("maxUnfinishedBytes", Arrays.asList("9223372036854775808"), Arrays.asList("1023"));
        cases("checkPeerAddress", Arrays.asList("TRUE"), none);
        cases("authKeyFile", none, Arrays.asList("/nonexistent/ibdxnet.key"));
    }

    @Test
    public void theCasesCoverEveryKey() {
        for (ConfigKey k : DXNetConfig.KEYS) {
            assertTrue("no cases for " + k.name, WRONG_TYPE.containsKey(k.name));
            if (k.type.equals("integer") || k.type.equals("number")) {
                assertTrue("no wrong-type case for " + k.name, !WRONG_TYPE.get(k.name).isEmpty());
                assertTrue("no out-of-range case for " + k.name, !OUT_OF_RANGE.get(k.name).isEmpty());
            }
        }
        assertEquals(DXNetConfig.KEYS.size(), WRONG_TYPE.size());
    }

    /** Each bad value, from a file, is refused by loading or validation naming the file, the key and the value. */
    @Test
    public void everyBadValueIsRefusedNamingItsKey() throws Exception {
        for (boolean wrongType : new boolean[] {true, false}) {
            for (Map.Entry<String, List<String>> e : (wrongType ? WRONG_TYPE : OUT_OF_RANGE).entrySet()) {
                String key = e.getKey();
                for (String bad : e.getValue()) {
                    String first = key.equals("nodeId") ? "" : "nodeId=1\ntransport=loopback\n";
                    Path f = write("case.conf", first + key + "=" + bad + "\n");
                    String msg = refusal(key + "=" + bad, () -> DXNetConfig.load(f).validate());
                    assertTrue(key + "=" + bad + ": " + msg, msg.contains(f.toString()) && msg.contains(key)
                            && msg.contains(bad));
                }
            }
        }
    }

    @Test
    public void crossKeyRulesNameBothKeys() throws Exception {
        DXNetConfig c = new DXNetConfig(1);
        c.transport = "loopback";
        c.keepAliveMs = 5_000;
        c.idleTimeoutMs = 5_000;
        String e = refusal("idle = keep-alive", c::validate);
        assertEquals("idleTimeoutMs = 5000 must be more than keepAliveMs = 5000", e);
        c = new DXNetConfig(1);
        c.transport = "loopback";
        c.maxUnfinishedBytesPerConnection = c.maxMessageSize - 1;
        e = refusal("unfinished < message", c::validate);
        assertTrue(e, e.contains("maxUnfinishedBytesPerConnection") && e.contains("maxMessageSize"));
    }

    /** addNode refuses what no node table can hold, naming it (issue 21: 70000 and the own id were taken, "localhost" threw StringIndexOutOfBounds). */
    @Test
    public void addNodeRefusesBadIdsAndAddresses() throws Exception {
        DXNetConfig c = new DXNetConfig(3);
        c.transport = "loopback";
        c.listen = "127.0.0.1:0";
        try (DXNet n = DXNet.start(c)) {
            String e = refusal("id 70000", () -> n.addNode(70000, "127.0.0.1:1"));
            assertTrue(e, e.contains("70000") && e.contains("65534"));
            e = refusal("own id", () -> n.addNode(3, "127.0.0.1:1"));
            assertTrue(e, e.contains("own id"));
            e = refusal("no port", () -> n.addNode(1, "localhost"));
            assertTrue(e, e.contains("localhost") && e.contains("host:port"));
            e = refusal("port 99999", () -> n.addNode(1, "localhost:99999"));
            assertTrue(e, e.contains("port outside"));
            e = refusal("null", () -> n.addNode(1, null));
            assertTrue(e, e.contains("missing"));
            n.addNode(1, "127.0.0.1:1"); // and a good one is taken
        }
    }

    /** A start that fails after the port was bound leaves no thread and no port behind: a retry works (issue 21, bug 1). */
    @Test
    public void aFailedNioStartLeavesNothingBehind() throws Exception {
        int port = TestPorts.freePort();
        java.util.Set<Thread> before = Thread.getAllStackTraces().keySet();
        DXNetConfig c = new DXNetConfig(0);
        c.transport = "nio";
        c.listen = "127.0.0.1:" + port;
        c.nodes.put(1, "no-such-host.invalid:22222");
        try {
            DXNet.start(c).close();
            fail("a node table naming a host that does not resolve was accepted");
        } catch (IllegalArgumentException expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("no-such-host.invalid"));
        }
        long deadline = System.nanoTime() + 5_000_000_000L;
        java.util.List<String> left;
        do {
            left = new java.util.ArrayList<>();
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                if (!before.contains(t) && t.isAlive() && t.getName().startsWith("dxnet")) {
                    left.add(t.getName());
                }
            }
        } while (!left.isEmpty() && System.nanoTime() < deadline && sleep(10));
        assertTrue("threads left behind: " + left, left.isEmpty());
        c.nodes.remove(1);
        try (DXNet again = DXNet.start(c)) {
            assertEquals(port, again.localPort());
        }
    }

    private static boolean sleep(long ms) throws InterruptedException {
        Thread.sleep(ms);
        return true;
    }

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

    /** The receive pool is bounded as a whole: the message names both keys and the bound. */
    @Test
    public void aReceivePoolAboveSixteenGibIsRefusedNamingBothKeys() throws Exception {
        DXNetConfig c = new DXNetConfig(1);
        c.transport = "nio";
        c.nioBufferSize = 64 << 20;
        c.nioBufferCount = 257;
        String e = refusal("a 16 GiB + 64 MiB pool", c::validate);
        assertEquals("nioBufferCount × nioBufferSize = 257 × 67108864 = 17246978048 bytes, the receive pool's largest size, must be at "
                + "most 17179869184 (16 GiB)", e);
        c.nioBufferCount = 256;
        c.validate();
    }

    /**
     * A pool within the bound but beyond this JVM's direct memory fails the
     * start at once, naming the keys and the JVM's limit (it was allocated
     * buffer by buffer until a bare OutOfMemoryError), on both transports
     * that use it; nothing is allocated.
     */
    @Test
    public void aReceivePoolTheJvmCannotHoldFailsTheStartNamingTheKeys() throws Exception {
        long limit = io.ibdxnet.transport.DirectMemory.limit();
        org.junit.Assume.assumeTrue("direct memory limit " + limit, limit < 16L << 30);
        for (String transport : new String[] {"loopback", "nio"}) {
            DXNetConfig c = new DXNetConfig(1);
            c.transport = transport;
            c.listen = "127.0.0.1:0";
            c.nioBufferSize = 64 << 20;
            c.nioBufferCount = 256;
            long used = io.ibdxnet.transport.DirectMemory.used();
            try {
                DXNet.start(c).close();
                fail(transport + ": a 16 GiB pool started with a limit of " + limit);
            } catch (IllegalStateException e) {
                assertTrue(e.getMessage(), e.getMessage().startsWith("the receive pool (nioBufferCount × nioBufferSize = 256 × "
                        + "67108864) needs 17179869184 bytes of direct memory; this JVM allows " + limit));
                assertTrue(e.getMessage(), e.getMessage().contains("-XX:MaxDirectMemorySize"));
            }
            long grew = io.ibdxnet.transport.DirectMemory.used() - used;
            assertTrue(transport + ": direct memory grew by " + grew, grew < 64 << 20);
        }
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

    /**
     * One node-table file for every node (issue 21): the file names no
     * {@code nodeId} (the documented default, 0, applies; it was refused with
     * "nodeId is missing"), and each node's id comes from the caller.
     */
    @Test
    public void oneNodeTableFileServesEveryNode() throws Exception {
        int[] ports = new int[2];
        for (int i = 0; i < 2; i++) {
            ports[i] = TestPorts.freePort();
        }
        Path f = Files.createTempFile("shared-nodes", ".properties");
        try {
            Files.write(f, ("transport=nio\nnode.0=127.0.0.1:" + ports[0] + "\nnode.1=127.0.0.1:" + ports[1] + "\n")
                    .getBytes(StandardCharsets.UTF_8));
            assertEquals("the documented default", 0, DXNetConfig.load(f).nodeId);
            assertEquals(1, DXNetConfig.load(f, 1).nodeId);
            try {
                DXNetConfig.load(f, 70_000).validate();
                fail("node id 70000 accepted");
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage(), e.getMessage().contains(f.toString()) && e.getMessage().contains("nodeId"));
            }
            try (DXNet n0 = DXNet.start(f, 0); DXNet n1 = DXNet.start(f, 1)) {
                assertEquals(ports[1], n1.localPort());
                java.util.concurrent.CountDownLatch got = new java.util.concurrent.CountDownLatch(1);
                n0.register(io.ibdxnet.app.BytesMessage.class, m -> {
                    if (m.getSource() == 1) {
                        got.countDown();
                    }
                });
                n1.sendMessage(new io.ibdxnet.app.BytesMessage(0, new byte[] {42}));
                assertTrue("node 0 did not receive node 1's message", got.await(30, java.util.concurrent.TimeUnit.SECONDS));
            }
        } finally {
            Files.deleteIfExists(f);
        }
    }

    /**
     * Every key's field in DXNetConfig.java carries the javadoc {@link #fieldDoc}
     * generates from {@link DXNetConfig#KEYS} (meaning, default, range: the
     * javadoc describes each field, the key table stays their one source);
     * IBDXNET_UPDATE_README=1 rewrites them.
     */
    @Test
    public void fieldJavadocIsGeneratedFromKeys() throws Exception {
        Path source = Paths.get("java/src/main/java/io/ibdxnet/DXNetConfig.java").toAbsolutePath();
        String text = new String(Files.readAllBytes(source), StandardCharsets.UTF_8);
        String updated = text;
        List<String> wrong = new java.util.ArrayList<>();
        for (ConfigKey k : DXNetConfig.KEYS) {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile(
                    "(?m)^((?:    /\\*\\*\\n(?:     \\*.*\\n)*?     \\*/\\n)|(?:    /\\*\\*.*\\*/\\n))?(    public \\w+ "
                            + k.name + ";\\n)").matcher(updated);
            assertTrue("no field for key " + k.name, m.find());
            String want = fieldDoc(k);
            if (!want.equals(m.group(1))) {
                wrong.add(k.name);
                updated = updated.substring(0, m.start()) + want + m.group(2) + updated.substring(m.end());
            }
        }
        if (!wrong.isEmpty()) {
            if (System.getenv("IBDXNET_UPDATE_README") != null) {
                Files.write(source, updated.getBytes(StandardCharsets.UTF_8));
                return;
            }
            fail("the javadoc of DXNetConfig's fields " + wrong + " differs from DXNetConfig.KEYS; rerun with "
                    + "IBDXNET_UPDATE_README=1 to regenerate");
        }
    }

    /** The javadoc of key {@code k}'s field: its meaning, default and range, Markdown code as {@code {@code}}. */
    static String fieldDoc(ConfigKey k) {
        String doc = k.doc.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
        doc = doc.replaceAll("`([^`]*)`", "{@code $1}");
        StringBuilder text = new StringBuilder("Key {@code ").append(k.name).append("}: ").append(doc);
        if (!doc.endsWith(".")) {
            text.append('.');
        }
        if (k.nativeKey != null) {
            text.append(" Sets the native engine's {@code ").append(k.nativeKey).append("}.");
        }
        text.append(" Type: ").append(k.type.replace("<", "&lt;").replace(">", "&gt;")).append("; default: ")
                .append(k.defaultText.isEmpty() ? "none" : "{@code " + k.defaultText + "}");
        if (!k.range.isEmpty()) {
            text.append("; range: ").append(k.range.replace("<", "&lt;").replace(">", "&gt;"));
        }
        text.append('.');
        StringBuilder out = new StringBuilder("    /**\n");
        StringBuilder line = new StringBuilder("     *");
        // Words, each {@code …} with what follows it as one word (never split over lines).
        java.util.regex.Matcher words = java.util.regex.Pattern.compile("(?:\\{@code [^}]*\\}|\\S)+").matcher(text);
        while (words.find()) {
            String word = words.group();
            if (line.length() + 1 + word.length() > 100 && line.length() > 6) {
                out.append(line).append('\n');
                line = new StringBuilder("     *");
            }
            line.append(' ').append(word);
        }
        return out.append(line).append("\n     */\n").toString();
    }

    /** docs/configuration.md's table of these keys is {@link DXNetConfig#markdownTable}; IBDXNET_UPDATE_README=1 rewrites it. */
    @Test
    public void docTableIsGeneratedFromKeys() throws Exception {
        Path doc = Paths.get("docs/configuration.md").toAbsolutePath();
        String text = new String(Files.readAllBytes(doc), StandardCharsets.UTF_8);
        String begin = "<!-- java-config-keys: begin -->\n";
        String end = "<!-- java-config-keys: end -->";
        int start = text.indexOf(begin);
        assertTrue("docs/configuration.md has the begin marker", start >= 0);
        start += begin.length();
        int stop = text.indexOf(end, start);
        assertTrue("docs/configuration.md has the end marker", stop >= 0);
        String want = DXNetConfig.markdownTable();
        if (!text.substring(start, stop).equals(want)) {
            if (System.getenv("IBDXNET_UPDATE_README") != null) {
                Files.write(doc, (text.substring(0, start) + want + text.substring(stop)).getBytes(StandardCharsets.UTF_8));
                return;
            }
            fail("docs/configuration.md's Java configuration table differs from DXNetConfig.KEYS; rerun with "
                    + "IBDXNET_UPDATE_README=1 to regenerate:\n" + want);
        }
    }
}
