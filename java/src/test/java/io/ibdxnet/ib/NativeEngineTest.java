package io.ibdxnet.ib;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.TestSupport;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

public class NativeEngineTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static Map<String, String> config(int node) {
        return StreamCallbacks.simConfig(node);
    }

    @Test
    public void javaSeesTheNativeLayout() {
        assertEquals(16, NativeLayout.of("IbdxnetNextWorkPackage").size);
        assertEquals(16, NativeLayout.of("IbdxnetPrevWorkResults").size);
        assertEquals(12, NativeLayout.of("IbdxnetCompletedWork").size);
        assertEquals(24, NativeLayout.of("IbdxnetCompletedWorkList").size);
        assertEquals(24, NativeLayout.of("IbdxnetIncomingEntry").size);
        assertEquals(16, NativeLayout.of("IbdxnetIncomingRingHeader").size);
        assertEquals(4, NativeLayout.of("IbdxnetNextWorkPackage").offset("offset", 4));
        // Every class that reads an offset or a constant finds it (name and width).
        NativeLayout.requireAll();
        try {
            NativeLayout.of("IbdxnetNextWorkPackage").offset("offset", 8);
            fail("a width mismatch must be refused");
        } catch (IllegalStateException expected) {
            assertTrue(expected.getMessage().contains("offset"));
        }
    }

    @Test
    public void javaReadsTheConstantsFromTheNativeLibrary() {
        assertEquals(6, NodeEvents.LEFT);
        assertEquals(-1, IncomingRing.NO_BUFFER); // u32::MAX, as an int
        assertEquals(0xFFFF, PrevWorkResults.NO_NODE);
        assertEquals(255, NextWorkPackage.FC_DATA_MAX);
        try {
            NativeLayout.constant("NO_SUCH_CONSTANT");
            fail("a constant the library does not report must be refused");
        } catch (IllegalStateException expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("NO_SUCH_CONSTANT"));
        }
    }

    @Test
    public void theTableParsesStructsAndConstants() {
        NativeLayout.Table t = NativeLayout.parse("S 8 4 a:0:4 b:4:4\nconst X -1\nconst Y 4294967295\n");
        assertEquals(4, t.struct("S").offset("b", 4));
        assertEquals(-1L, t.constant("X"));
        assertEquals(-1, (int) t.constant("Y"));
        assertEquals(1, t.structs.size());
    }

    @Test
    public void connectReturnsTheRingAndTheIdOfOneConnection() throws Exception {
        StreamCallbacks a = new StreamCallbacks(0, 0);
        StreamCallbacks b = new StreamCallbacks(1, 0);
        try (NativeEngine ea = NativeEngine.start(config(0), a); NativeEngine eb = NativeEngine.start(config(1), b)) {
            ea.addNode(1, "127.0.0.1", eb.localPort());
            eb.addNode(0, "127.0.0.1", ea.localPort());
            NativeEngine.RingHandle first = ea.connect(1, 10_000);
            NativeEngine.RingHandle again = ea.connect(1, 10_000);
            assertTrue(first.ringAddress != 0);
            assertTrue(first.connectionId != NextWorkPackage.CONNECTION_NONE);
            assertEquals(first.ringAddress, again.ringAddress);
            assertEquals(first.connectionId, again.connectionId);
            // Each connect took one handle: the connection stays known until both are released.
            ea.releaseConnection(again.connectionId);
            assertTrue(ea.connectionOpen(first.connectionId));
            ea.releaseConnection(first.connectionId);
            assertFalse("no handle left: Java holds no connection", ea.connectionOpen(first.connectionId));
        }
    }

    @Test
    public void defaultsComeFromTheNativeLibrary() {
        Map<String, String> d = NativeEngine.defaults();
        assertEquals("20", d.get("sq_size"));
        assertEquals("2000", d.get("srq_size"));
        assertEquals("5730", d.get("listen").split(":")[1]);
    }

    @Test
    public void twoEnginesStreamBothWaysIntactAndInOrder() throws Exception {
        long limit = 8 << 20;
        StreamCallbacks a = new StreamCallbacks(0, limit);
        StreamCallbacks b = new StreamCallbacks(1, limit);
        try (NativeEngine ea = NativeEngine.start(config(0), a); NativeEngine eb = NativeEngine.start(config(1), b)) {
            StreamCallbacks.streamBothWays(ea, a, eb, b, limit);
            java.util.Set<String> names = new java.util.HashSet<>();
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                if (t.getName().startsWith("ibdxnet-")) {
                    assertTrue(t.getName(), t.isDaemon());
                    names.add(t.getName());
                }
            }
            assertTrue(names.toString(), names.contains("ibdxnet-send-0000") && names.contains("ibdxnet-recv-0001"));
            Map<String, Long> s = ea.stats();
            assertEquals(Long.valueOf(0), s.get("upcall_exceptions"));
            assertEquals(Long.valueOf(0), s.get("errors"));
            assertEquals(Long.valueOf(1), s.get("running"));
        }
    }

    @Test
    public void anExceptionInAnUpcallIsHandledAndTheEngineKeepsRunning() throws Exception {
        EngineCallbacks throwing = new EngineCallbacks() {
            @Override
            public int nextDataToSend(long p, long c, long n) {
                throw new IllegalStateException("bug in the transport");
            }

            @Override
            public int received(long ring) {
                return EngineCallbacks.consumed(0);
            }

            @Override
            public void nodeEvent(int kind, int node, long value) {}
        };
        try (NativeEngine e = NativeEngine.start(config(5), throwing)) {
            waitFor("exceptions counted", () -> e.stats().get("upcall_exceptions") > 100);
            assertEquals(Long.valueOf(1), e.stats().get("running"));
        }
    }

    @Test
    public void exceptionsInBothUpcallsAreCountedAndTheNextUpcallsWork() throws Exception {
        // This JVM runs with -Xcheck:jni: the library checks every up-call.
        assertTrue(NativeEngine.checkEveryUpcall());
        Map<String, Long> s = UpcallExceptions.run();
        assertEquals(Long.valueOf(1), s.get("upcall_check_every"));
    }

    @Test
    public void exceptionsInBothUpcallsAreFoundByTheirZeroWithoutJniChecks() throws Exception {
        // A child JVM without -Xcheck:jni: only an up-call that returned 0 is
        // checked, so an escaped exception must show as that 0 (HotSpot's CHECK_0).
        io.ibdxnet.ChildJvm.Result r = io.ibdxnet.ChildJvm.run(UpcallExceptions.class, List.of(), List.of(), 120_000);
        String text = r.output;
        assertEquals(text, 0, r.exit);
        assertTrue(text, text.contains("upcall-exceptions-ok exceptions=" + 2 * UpcallExceptions.THROWS + " check_every=0"));
        assertFalse(text, text.contains("WARNING in native method"));
    }

    @Test
    public void failedConnectionsAreIbExceptions() throws Exception {
        StreamCallbacks cb = new StreamCallbacks(7, 0);
        try (NativeEngine e = NativeEngine.start(config(7), cb)) {
            int deadPort = io.ibdxnet.TestPorts.freePort();
            e.addNode(8, "127.0.0.1", deadPort);
            try {
                e.connect(8, 200);
                fail("connect to a dead node must fail");
            } catch (IbException expected) {
                assertTrue(expected.getMessage(), expected.getMessage().contains("not established"));
            }
            try {
                e.connect(99, 200);
                fail("unknown node");
            } catch (IbException expected) {
                assertTrue(expected.getMessage().contains("node table"));
            }
            try {
                e.returnBuffer(1 << 30);
                fail("unknown buffer");
            } catch (IllegalArgumentException expected) {
                assertTrue(expected.getMessage().contains("does not exist"));
            }
        }
    }

    @Test
    public void badConfigurationIsRefusedWithTheKeyNamed() {
        Map<String, String> c = config(1);
        c.put("sq_size", "zero");
        try {
            NativeEngine.start(c, new StreamCallbacks(1, 0)).close();
            fail("bad configuration accepted");
        } catch (IllegalArgumentException expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("sq_size"));
        } catch (IbException e) {
            fail("wrong exception " + e);
        }
    }

    @Test
    public void closedEngineRefusesCalls() throws Exception {
        NativeEngine e = NativeEngine.start(config(3), new StreamCallbacks(3, 0));
        e.close();
        e.close();
        try {
            e.localPort();
            fail("closed engine used");
        } catch (IllegalStateException expected) {
            assertTrue(expected.getMessage().contains("closed"));
        }
    }
}
