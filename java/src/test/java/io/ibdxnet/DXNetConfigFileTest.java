package io.ibdxnet;

import static io.ibdxnet.ConfigTestSupport.refusal;
import static io.ibdxnet.ConfigTestSupport.write;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Configuration files: JSON and properties give the same configuration,
 * errors name the file and the key, and one node-table file serves every node.
 */
public class DXNetConfigFileTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

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
}
