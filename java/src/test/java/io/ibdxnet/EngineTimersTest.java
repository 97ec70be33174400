package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The native engine's operation timers (native key {@code stats_timers}) reach
 * {@link DXNet#transportStats()} on ib (sim): the names come from the library,
 * so this test only checks their pattern and that traffic counted them.
 */
public class EngineTimersTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    private List<DXNet> echoPair(String timers) throws Exception {
        List<DXNet> n = TestSupport.mesh("ib", 2, c -> c.nativeConfig.put("stats_timers", timers), nodes);
        for (DXNet x : n) {
            x.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        }
        n.get(1).register(BytesRequest.class, req -> n.get(1).reply(req, BytesResponse.echo(req)));
        for (int i = 0; i < 200; i++) {
            BytesResponse r = n.get(0).sendSync(new BytesRequest(1, bytesOf(new long[] {i})));
            assertArrayEquals(new long[] {i}, longsOf(r.bytes));
        }
        return n;
    }

    @Test
    public void everyTimerCountsAfterTraffic() throws Exception {
        for (DXNet n : echoPair("true")) {
            Map<String, Long> s = n.transportStats();
            List<String> timers = new ArrayList<>();
            for (String k : s.keySet()) {
                if (k.startsWith("timer_") && k.endsWith("_count")) {
                    timers.add(k.substring(0, k.length() - "_count".length()));
                }
            }
            assertEquals("post, poll and up-call of both threads: " + timers, 6, timers.size());
            for (String t : timers) {
                assertTrue(t + " counted nothing: " + s, s.get(t + "_count") > 0);
                long min = s.get(t + "_min_ns");
                long p50 = s.get(t + "_p50_ns");
                long p999 = s.get(t + "_p999_ns");
                long max = s.get(t + "_max_ns");
                assertTrue(t + ": " + s, min <= p50 && p50 <= p999 && p999 <= max && s.get(t + "_total_ns") >= max);
            }
            assertTrue(s.containsKey("timer_recv_upcall_avg_ns"));
        }
    }

    @Test
    public void timersOffCountNothing() throws Exception {
        for (DXNet n : echoPair("false")) {
            Map<String, Long> s = n.transportStats();
            assertTrue(s.get("wrs_sent") > 0);
            assertEquals(0L, (long) s.get("timer_send_upcall_count"));
            assertEquals(0L, (long) s.get("timer_recv_poll_count"));
        }
    }
}
