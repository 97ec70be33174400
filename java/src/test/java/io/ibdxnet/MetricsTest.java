package io.ibdxnet;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.metrics.NodeMetrics;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** Every node's counters as MBeans on the platform MBean server, and the periodic statistics line. */
public class MetricsTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    private static final MBeanServer SERVER = ManagementFactory.getPlatformMBeanServer();
    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    private static long read(ObjectName name, String attribute) throws Exception {
        return (Long) SERVER.getAttribute(name, attribute);
    }

    @Test
    public void aCounterGrowsWhileTrafficFlowsAndCloseUnregisters() throws Exception {
        List<DXNet> mesh = TestSupport.mesh("loopback", 2, c -> {}, nodes);
        AtomicLong received = new AtomicLong();
        mesh.get(1).register(BytesMessage.class, m -> received.incrementAndGet());
        ObjectName core = NodeMetrics.name(0, null, 1);
        ObjectName transport = NodeMetrics.name(0, "loopback", 1);
        assertEquals("io.ibdxnet:type=Node,node=0,transport=loopback", transport.toString());
        assertTrue(SERVER.isRegistered(core));
        assertTrue(SERVER.isRegistered(transport));
        assertTrue(SERVER.isRegistered(NodeMetrics.name(1, "loopback", 1)));
        try (Senders traffic = Senders.start("metrics-test-traffic", 1, (id, seq) -> {
            try {
                mesh.get(0).sendMessage(new BytesMessage(1, new byte[256]));
            } catch (NetworkException e) {
                throw new Senders.Done(); // the node closed under it
            }
        })) {
            waitFor("traffic", () -> traffic.sent() > 10 && received.get() > 10);
            long first = read(transport, "bytes_sent");
            waitFor("bytes_sent grows in the MBean", () -> {
                try {
                    return read(transport, "bytes_sent") > first;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
        }
        assertEquals(0L, read(core, "messages_dropped"));
        assertTrue(SERVER.getMBeanInfo(core).getAttributes().length > 5);
        mesh.get(0).close();
        assertFalse("close unregisters the core's MBean", SERVER.isRegistered(core));
        assertFalse("close unregisters the transport's MBean", SERVER.isRegistered(transport));
        assertTrue("the other node's stay", SERVER.isRegistered(NodeMetrics.name(1, "loopback", 1)));
        mesh.get(1).close();
        assertTrue(SERVER.queryNames(new ObjectName("io.ibdxnet:type=Node,node=1,*"), null).isEmpty());
    }

    @Test
    public void theNativeTimersAreAttributesOfTheIbTransport() throws Exception {
        List<DXNet> mesh = TestSupport.mesh("ib", 2, c -> c.nativeConfig.put("stats_timers", "true"), nodes);
        AtomicLong received = new AtomicLong();
        mesh.get(1).register(BytesMessage.class, m -> received.incrementAndGet());
        for (int i = 0; i < 100; i++) {
            mesh.get(0).sendMessage(new BytesMessage(1, new byte[64]));
        }
        waitFor("received", () -> received.get() == 100);
        ObjectName ib = NodeMetrics.name(0, "ib", 1);
        assertTrue(read(ib, "wrs_sent") > 0);
        assertTrue(read(ib, "timer_send_post_count") > 0);
        mesh.get(0).close();
        assertFalse(SERVER.isRegistered(ib));
    }

    @Test
    public void twoNodesWithOneIdDoNotCollide() throws Exception {
        List<DXNet> a = TestSupport.mesh("nio", 1, c -> {}, nodes);
        List<DXNet> b = TestSupport.mesh("nio", 1, c -> {}, nodes);
        ObjectName first = NodeMetrics.name(0, "nio", 1);
        ObjectName second = NodeMetrics.name(0, "nio", 2);
        assertNotEquals(first, second);
        assertTrue(SERVER.isRegistered(first));
        assertTrue(SERVER.isRegistered(second));
        assertTrue(SERVER.isRegistered(NodeMetrics.name(0, null, 2)));
        b.get(0).close();
        assertFalse(SERVER.isRegistered(second));
        assertFalse(SERVER.isRegistered(NodeMetrics.name(0, null, 2)));
        assertTrue(SERVER.isRegistered(first));
        a.get(0).close();
        assertTrue(SERVER.queryNames(new ObjectName("io.ibdxnet:type=Node,node=0,*"), null).isEmpty());
    }

    private static boolean statsThreadOf(int node) {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().equals("dxnet-stats-" + node) && t.isAlive()) {
                return true;
            }
        }
        return false;
    }

    @Test
    public void theStatisticsLineIsOffByDefaultAndLoggedEveryInterval() throws Exception {
        assertEquals(0, new DXNetConfig(0).statsIntervalMs);
        Logger stats = Logger.getLogger(NodeMetrics.LOGGER); // strong reference: JUL holds loggers weakly
        LogCapture lines = new LogCapture();
        stats.addHandler(lines);
        try {
            List<DXNet> off = TestSupport.mesh("loopback", 1, c -> {}, nodes);
            assertFalse(statsThreadOf(0));
            off.get(0).close();
            List<DXNet> on = TestSupport.mesh("loopback", 1, c -> c.statsIntervalMs = 50, nodes);
            waitFor("two statistics lines", () -> lines.records.size() >= 2);
            LogRecord r = lines.records.get(0);
            assertEquals(java.util.logging.Level.INFO, r.getLevel());
            assertEquals(NodeMetrics.LOGGER, r.getLoggerName());
            assertTrue(r.getMessage(), r.getMessage().startsWith("node 0 (loopback): core messages_dropped=0 "));
            assertTrue(r.getMessage(), r.getMessage().contains(" transport connections="));
            on.get(0).close();
            waitFor("the statistics thread ends with its node", () -> !statsThreadOf(0));
        } finally {
            stats.removeHandler(lines);
        }
    }
}
