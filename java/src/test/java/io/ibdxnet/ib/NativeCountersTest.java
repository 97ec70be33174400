package io.ibdxnet.ib;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.TestSupport;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The engine's counters table read in place ({@link NativeCounters}) on the sim fabric. */
public class NativeCountersTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static int slot(NativeCounters c, String name) {
        return c.descriptor().require(name);
    }

    @Test
    public void theDescriptorComesFromTheLibrary() {
        NativeLayout.Counters d = NativeLayout.counters();
        assertEquals("one cache line per slot", 64, d.stride);
        assertTrue(d.size() > 0);
        Set<String> names = new HashSet<>();
        for (int i = 0; i < d.size(); i++) {
            assertTrue(d.name(i), names.add(d.name(i)));
            assertTrue(d.kind(i), d.kind(i).equals("counter") || d.kind(i).equals("gauge"));
            assertTrue(d.name(i), !d.doc(i).isEmpty());
        }
        assertEquals("gauge", d.kind(d.require("receive_buffers")));
        assertEquals("counter", d.kind(d.require("bytes_sent")));
        assertEquals("counter", d.kind(d.require("packets_in")));
        assertEquals("counter", d.kind(d.require("auth_challenges")));
    }

    /** A counter Java needs and the library does not describe fails by name, when looked up (at start). */
    @Test
    public void aCounterMissingFromTheDescriptorFailsLoudly() {
        NativeLayout.Table t = NativeLayout.parse("const X 1\ncounters 2 64 0\ncounter 0 bytes_sent counter payload bytes posted\n"
                + "counter 1 errors counter failed completions\n");
        NativeLayout.Counters d = t.counters();
        assertEquals(2, d.size());
        assertEquals(1, d.require("errors"));
        assertEquals("failed completions", d.doc(1));
        try {
            d.require("receive_buffers");
            fail("a counter the library does not describe must be refused");
        } catch (IllegalStateException expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("receive_buffers"));
        }
        try {
            NativeLayout.parse("counters 3 64 0\ncounter 0 a counter x\n");
            fail("a descriptor with fewer slots than it announces must be refused");
        } catch (IllegalStateException expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("1 of 3"));
        }
        try {
            NativeLayout.parse("S 8 4 a:0:4\n").counters();
            fail("a library without the table must be refused");
        } catch (IllegalStateException expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("counters table"));
        }
    }

    @Test
    public void countersGrowWithTrafficEqualTheBytesStreamedAndStayReadableAfterClose() throws Exception {
        long limit = 8 << 20;
        StreamCallbacks a = new StreamCallbacks(0, limit);
        StreamCallbacks b = new StreamCallbacks(1, limit);
        NativeEngine ea = NativeEngine.start(StreamCallbacks.simConfig(0), a);
        NativeEngine eb = NativeEngine.start(StreamCallbacks.simConfig(1), b);
        try {
            NativeCounters ca = ea.counters();
            NativeCounters cb = eb.counters();
            int sent = slot(ca, "bytes_sent");
            int received = slot(cb, "bytes_received");
            int wrs = slot(ca, "wrs_sent");
            assertEquals("the pool's size, set at start", 1024, ca.get(slot(ca, "receive_buffers")));
            assertEquals(1024, ea.receiveBuffers());
            assertEquals(0, ca.get(sent));
            // Sample a's bytes_sent while the streams flow: it only grows, and it is seen growing.
            List<Long> samples = new ArrayList<>();
            AtomicBoolean done = new AtomicBoolean();
            Thread sampler = new Thread(() -> {
                while (!done.get()) {
                    long v = ca.get(sent);
                    if (samples.isEmpty() || samples.get(samples.size() - 1) != v) {
                        samples.add(v);
                    }
                    Thread.yield();
                }
            }, "counters-sampler");
            sampler.start();
            try {
                StreamCallbacks.streamBothWays(ea, a, eb, b, limit);
            } finally {
                done.set(true);
                sampler.join();
            }
            for (int i = 1; i < samples.size(); i++) {
                assertTrue("bytes_sent went down: " + samples, samples.get(i) > samples.get(i - 1));
            }
            // At least one increase seen during the stream (a value in between needs the sampler to
            // be scheduled mid-stream, which a loaded 2-core host does not promise).
            assertTrue("seen growing while traffic flowed: " + samples, samples.size() >= 2);
            // The engine's own values: it posted and received exactly what the streams carried.
            assertEquals(limit, ca.get(sent));
            assertEquals(limit, cb.get(received));
            assertEquals(limit, eb.counters().get(slot(cb, "bytes_sent")));
            assertEquals(limit, ca.get(slot(ca, "bytes_received")));
            assertTrue(ca.get(wrs) > 0);
            // The connection manager counts in the same table.
            assertTrue(ca.get(slot(ca, "connections_created")) + cb.get(slot(cb, "connections_created")) >= 1);
            assertTrue(ca.get(slot(ca, "packets_out")) > 0 && cb.get(slot(cb, "packets_in")) > 0);
            assertEquals(0, ca.get(slot(ca, "dropped_unauthenticated")));
            assertEquals(0, ca.get(slot(ca, "errors")) + cb.get(slot(cb, "errors")));
            // stats() (what IbTransport and the MBeans read) has the table's values under the same names.
            // Read between two reads of the table: the engine's threads go on counting (an idle
            // receive thread's iterations grew from 93 to 1 024 across one stats() call in a CI run).
            long[] before = new long[ca.size()];
            for (int i = 0; i < ca.size(); i++) {
                before[i] = ca.get(i);
            }
            Map<String, Long> s = ea.stats();
            for (int i = 0; i < ca.size(); i++) {
                String name = ca.descriptor().name(i);
                long after = ca.get(i);
                Long v = s.get(name);
                assertTrue(name + ": " + before[i] + " <= " + v + " <= " + after, v != null
                        && Math.min(before[i], after) <= v && v <= Math.max(before[i], after));
            }
            assertTrue("and what the library computes: " + s, s.containsKey("free_buffers") && s.containsKey("upcall_exceptions")
                    && s.containsKey("connections") && s.containsKey("timer_send_post_count"));
            ea.close();
            eb.close();
            // After close the table still holds the last values (the library keeps it): no freed memory read.
            assertEquals(limit, ca.get(sent));
            assertEquals(limit, cb.get(received));
            assertEquals(1024, ea.receiveBuffers());
            try {
                ea.stats();
                fail("the computed part needs the engine");
            } catch (EngineClosedException expected) {
                // as before
            }
        } finally {
            ea.close(); // again, or first if an assertion failed: no engine left running for later tests
            eb.close();
        }
    }
}
