package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
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
        try {
            DXNetConfig.load(write("bad.json", "{\"nodeId\": 1, \"handlerThreadz\": 2}"));
            fail("unknown key accepted");
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("handlerThreadz"));
        }
        try {
            DXNetConfig.load(write("bad.conf", "nodeId=1\nhandlerThreads=two\n"));
            fail("bad number accepted");
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("bad.conf") && e.getMessage().contains("handlerThreads"));
        }
        try {
            DXNetConfig.load(write("broken.json", "{nodeId"));
            fail("broken JSON accepted");
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("broken.json"));
        }
    }
}
