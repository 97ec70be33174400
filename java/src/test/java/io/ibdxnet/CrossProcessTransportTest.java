package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import io.ibdxnet.ib.NativeEngine;
import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.After;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Two nodes in two processes on this host, configured as a user would: the
 * default transport works across processes, and the ib transport on the
 * in-process sim fabric refuses a node of another process at once with an
 * error naming the node and the fix — never a misrouted message, never a
 * timeout. The peer is {@link Peer} in a child JVM.
 */
public class CrossProcessTransportTest {
    @Rule
    public final Timeout timeout = new Timeout(240, TimeUnit.SECONDS);

    @Rule
    public final ChildJvm.Rule children = new ChildJvm.Rule();
    private DXNet node;

    @After
    public void cleanUp() {
        if (node != null) {
            node.close();
        }
    }

    /**
     * Node 1 in its own process: default configuration plus {@code key=value}
     * arguments (DXNetConfig keys); counts messages, answers echoes, and exits
     * after answering an echo of {@code -1} with the count.
     */
    public static final class Peer {
        public static void main(String[] args) throws Exception {
            DXNetConfig c = new DXNetConfig(1);
            for (String a : args) {
                int eq = a.indexOf('=');
                String key = a.substring(0, eq);
                if (key.startsWith("node.")) {
                    c.nodes.put(Integer.parseInt(key.substring(5)), a.substring(eq + 1));
                } else if (key.startsWith("native.")) {
                    c.nativeConfig.put(key.substring(7), a.substring(eq + 1));
                } else if (key.equals("transport")) {
                    c.transport = a.substring(eq + 1);
                }
            }
            DXNet n = DXNet.start(c);
            register(n);
            AtomicLong received = new AtomicLong();
            java.util.concurrent.CountDownLatch quit = new java.util.concurrent.CountDownLatch(1);
            n.register(DataMessage.TYPE, DataMessage.DATA, m -> received.incrementAndGet());
            n.register(BytesRequest.TYPE, m -> {
                BytesRequest r = (BytesRequest) m;
                boolean last = longsOf(r.bytes).length == 1 && longsOf(r.bytes)[0] == -1;
                if (last) {
                    r.bytes = bytesOf(new long[] {received.get()});
                }
                try {
                    n.sendMessage(BytesResponse.echo(r));
                } catch (NetworkException e) {
                    throw new IllegalStateException(e);
                }
                if (last) {
                    quit.countDown();
                }
            });
            System.out.println("peer ready on " + n.fabricName());
            quit.await();
            n.close(); // an orderly close: the answer leaves first
            System.out.println("peer done");
        }
    }

    private static void register(DXNet n) {
        n.registerMessageType(DataMessage.TYPE, DataMessage.DATA, DataMessage.class);
        n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
    }

    private static int freePort() throws IOException {
        return io.ibdxnet.TestPorts.freePort();
    }

    private ChildJvm peer(String... args) throws IOException {
        return children.start(Peer.class, List.of(), Arrays.asList(args));
    }

    /** Both nodes with a default DXNetConfig: only node ids and addresses set. */
    @Test
    public void defaultConfigurationExchangesMessagesAndARequestAcrossProcesses() throws Exception {
        boolean rdma = !rdmaDevices().isEmpty();
        String a0 = "127.0.0.1:" + freePort();
        String a1 = "127.0.0.1:" + freePort();
        ChildJvm p = peer("node.0=" + a0, "node.1=" + a1);
        p.awaitOutput("peer ready", 120_000);
        List<String> said = new CopyOnWriteArrayList<>();
        Logger choice = Logger.getLogger("io.ibdxnet.Transports");
        Handler h = new Handler() {
            @Override
            public void publish(LogRecord r) {
                said.add(r.getLevel() + " " + r.getMessage());
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
        };
        choice.addHandler(h);
        DXNetConfig c = new DXNetConfig(0);
        c.nodes.put(0, a0);
        c.nodes.put(1, a1);
        try {
            node = DXNet.start(c);
        } finally {
            choice.removeHandler(h);
        }
        register(node);
        String expected = rdma ? "ib" : "nio";
        assertEquals(said.toString(), 1, said.size());
        assertTrue(said.get(0), said.get(0).startsWith("INFO node 0: transport = auto: " + expected + ", because"));
        if (!rdma) {
            assertTrue(said.get(0), said.get(0).contains("no RDMA device"));
            assertTrue(p.output(), p.output().contains("peer ready on tcp"));
        }
        exchangeWith(p);
    }

    /** 1000 messages and a request to the peer, which then counts what it got and exits. */
    private void exchangeWith(ChildJvm p) throws Exception {
        int messages = 1000;
        for (int i = 0; i < messages; i++) {
            node.sendMessage(new DataMessage(1, 0, i, 100));
        }
        BytesResponse r = node.sendSync(new BytesRequest(1, bytesOf(new long[] {42, 43})), 30_000);
        assertArrayEquals(new long[] {42, 43}, longsOf(r.bytes));
        assertEquals(1, r.getSource());
        BytesResponse count = node.sendSync(new BytesRequest(1, bytesOf(new long[] {-1})), 30_000);
        assertArrayEquals("messages the peer received", new long[] {messages}, longsOf(count.bytes));
        assertEquals(p.output(), 0, p.waitForExit(30_000));
    }

    /** transport = ib on the simhost fabric, which spans the processes of one host: it works. */
    @Test
    public void simhostFabricConnectsNodesOfTwoProcesses() throws Exception {
        String a0 = "127.0.0.1:" + freePort();
        String a1 = "127.0.0.1:" + freePort();
        ChildJvm p = peer("transport=ib", "native.fabric=simhost", "native.listen=" + a1, "node.0=" + a0);
        p.awaitOutput("peer ready on simhost", 120_000);
        DXNetConfig c = new DXNetConfig(0);
        c.transport = "ib";
        c.nativeConfig.put("fabric", "simhost");
        c.nativeConfig.put("listen", a0);
        c.nodes.put(1, a1);
        node = DXNet.start(c);
        register(node);
        assertTrue(node.fabricName(), node.fabricName().startsWith("simhost"));
        exchangeWith(p);
    }

    /** transport = ib on the sim fabric in two processes: refused at once, by name. */
    @Test
    public void simFabricRefusesANodeOfAnotherProcessAtOnce() throws Exception {
        crossProcessSim("sim");
    }

    /** As above with fabric auto, which is sim on a host without an RDMA device. */
    @Test
    public void autoFabricWithoutRdmaRefusesANodeOfAnotherProcessAtOnce() throws Exception {
        Assume.assumeTrue("this host has an RDMA device: fabric auto is verbs", rdmaDevices().isEmpty());
        crossProcessSim("auto");
    }

    private void crossProcessSim(String fabric) throws Exception {
        String a0 = "127.0.0.1:" + freePort();
        String a1 = "127.0.0.1:" + freePort();
        ChildJvm p = peer("transport=ib", "native.fabric=" + fabric, "native.listen=" + a1, "node.0=" + a0);
        p.awaitOutput("peer ready on sim", 120_000);
        DXNetConfig c = new DXNetConfig(0);
        c.transport = "ib";
        c.nativeConfig.put("fabric", fabric);
        c.listen = a0;
        c.nodes.put(1, a1);
        int connectTimeoutMs = c.connectTimeoutMs;
        node = DXNet.start(c);
        register(node);
        AtomicLong toSelf = new AtomicLong();
        node.register(DataMessage.TYPE, DataMessage.DATA, m -> toSelf.incrementAndGet());
        node.register(BytesRequest.TYPE, m -> toSelf.incrementAndGet());
        String expected = "node 1 is not in this process's sim fabric";
        String fix = "sim connects nodes of one process only — use transport=nio, or an RDMA device";
        long t0 = System.nanoTime();
        try {
            node.sendMessage(new DataMessage(1, 0, 0, 100));
            fail("a message to node 1 in another process was accepted");
        } catch (NetworkException e) {
            assertTrue(e.getMessage(), e.getMessage().contains(expected) && e.getMessage().contains(fix));
        }
        long sendMs = (System.nanoTime() - t0) / 1_000_000;
        t0 = System.nanoTime();
        try {
            node.sendSync(new BytesRequest(1, bytesOf(new long[] {1})), 30_000);
            fail("a request to node 1 in another process was answered");
        } catch (RequestTimeoutException e) {
            throw new AssertionError("a timeout instead of the fabric error", e);
        } catch (NetworkException e) {
            assertTrue(e.getMessage(), e.getMessage().contains(expected) && e.getMessage().contains(fix));
        }
        long requestMs = (System.nanoTime() - t0) / 1_000_000;
        System.err.println("fabric " + fabric + " across processes: send failed after " + sendMs + " ms, request after "
                + requestMs + " ms (connect timeout " + connectTimeoutMs + " ms)");
        assertTrue("send failed only after " + sendMs + " ms", sendMs < connectTimeoutMs / 10);
        assertTrue("request failed only after " + requestMs + " ms", requestMs < connectTimeoutMs / 10);
        assertTrue("counted: " + node.transportStats(), node.transportStats().get("foreign_fabric") >= 1);
        TestSupport.assertHoldsFor("no message this node sent to node 1 came back to itself", 200, () -> toSelf.get() == 0);
    }

    private static List<String> rdmaDevices() throws Exception {
        try {
            return NativeEngine.rdmaDevices();
        } catch (LinkageError e) {
            return java.util.Collections.emptyList();
        }
    }
}
