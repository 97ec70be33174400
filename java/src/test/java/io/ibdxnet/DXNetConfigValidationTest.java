package io.ibdxnet;

import static io.ibdxnet.ConfigTestSupport.refusal;
import static io.ibdxnet.ConfigTestSupport.write;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.internal.Transports;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * What the configuration's validation refuses, naming the key (and the file):
 * every key's values of the wrong type and out of range, cross-key rules, a
 * receive pool above the bound or beyond the JVM's direct memory; and what a
 * node refuses at start and in {@code addNode}, leaving nothing behind.
 */
public class DXNetConfigValidationTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

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
}
