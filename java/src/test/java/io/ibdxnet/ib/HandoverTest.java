package io.ibdxnet.ib;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import java.util.Arrays;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The idempotent completion hand-over: {@code nextDataToSend} throws every few
 * calls, at a different point each time (before anything is applied, after the
 * previous package's results, after a confirmation, before the
 * acknowledgement), while two engines stream to each other. The engine hands
 * again what was not applied, and nothing twice: the stream completes and the
 * ring's accounting ends at exactly zero unconfirmed bytes.
 */
public class HandoverTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    private static final int EVERY = 2;

    /** A small ring: the stream needs many up-calls, so many of them fail. */
    private static Map<String, String> config(int node) {
        Map<String, String> c = StreamCallbacks.simConfig(node);
        c.put("send_ring_size", Integer.toString(64 << 10));
        return c;
    }

    @Test
    public void confirmationsSurviveExceptionsInNextDataToSendAndApplyOnce() throws Exception {
        long limit = 4 << 20;
        StreamCallbacks a = new StreamCallbacks(0, limit);
        StreamCallbacks b = new StreamCallbacks(1, limit);
        long[] thrown = new long[4];
        int[] call = {0};
        a.faults = point -> {
            if (point == StreamCallbacks.FAULT_BEFORE) {
                call[0]++;
            }
            if (call[0] % EVERY == 0 && point == (call[0] / EVERY) % 4) {
                thrown[point]++;
                throw new IllegalStateException("test: fault at point " + point);
            }
        };
        try (NativeEngine ea = NativeEngine.start(config(0), a);
                NativeEngine eb = NativeEngine.start(config(1), b)) {
            StreamCallbacks.streamBothWays(ea, a, eb, b, limit);
            a.faults = null;
            long total = Arrays.stream(thrown).sum();
            System.out.println("faults per point (before, after prev, after an entry, before the ack): " + Arrays.toString(thrown));
            for (int p = 0; p < 4; p++) {
                assertTrue("faults at every point: " + Arrays.toString(thrown), thrown[p] > 0);
            }
            Map<String, Long> s = ea.stats();
            assertEquals("every fault counted", Long.valueOf(total), s.get("upcall_exceptions"));
            assertEquals("nothing confirmed twice", 0, a.overConfirmed.get());
            assertEquals(limit, a.confirmed.get());
            assertEquals("ring accounting at zero unconfirmed", 0, a.unconfirmed());
            assertEquals(0, b.overConfirmed.get());
            assertEquals(0, b.unconfirmed());
        }
    }
}
