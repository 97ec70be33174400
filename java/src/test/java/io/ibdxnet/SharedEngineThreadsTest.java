package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * DXNet over ib on sim with {@code native.engine_threads=shared}: one engine
 * thread per node makes both up-calls ({@code nextDataToSend} and
 * {@code received}); messages both ways and requests arrive intact and in
 * order, and idle stretches (the thread asleep) between them wake it.
 */
public class SharedEngineThreadsTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    private List<DXNet> start() throws Exception {
        List<DXNet> n = TestSupport.mesh("ib", 2, c -> {
            c.handlerThreads = 1;
            c.nativeConfig.put("engine_threads", "shared");
        }, nodes);
        for (DXNet d : n) {
            d.registerMessageType(DataMessage.TYPE, DataMessage.DATA, DataMessage.class);
            d.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
            d.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        }
        return n;
    }

    /** The names of the live threads. */
    private static List<String> threadNames() {
        List<String> out = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            out.add(t.getName());
        }
        return out;
    }

    @Test
    public void messagesBothWaysAndRequestsOnOneEngineThreadPerNode() throws Exception {
        List<DXNet> n = start();
        // An engine thread appears among the JVM's threads once it attached (its first iteration).
        TestSupport.waitFor("both shared engine threads attached", 10_000,
                () -> threadNames().contains("ibdxnet-shared-0000") && threadNames().contains("ibdxnet-shared-0001"));
        List<String> names = threadNames();
        assertTrue(names.toString(), !names.contains("ibdxnet-send-0000") && !names.contains("ibdxnet-recv-0001"));
        int perSide = 3000;
        AtomicReference<String> problem = new AtomicReference<>();
        List<AtomicLong> received = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            int me = i;
            AtomicLong got = new AtomicLong();
            received.add(got);
            n.get(i).register(DataMessage.TYPE, DataMessage.DATA, m -> {
                DataMessage d = (DataMessage) m;
                if (d.seq != got.get() || !d.intact() || d.getSource() != 1 - me) {
                    problem.compareAndSet(null, "node " + me + ": seq " + d.seq + " expected " + got.get());
                }
                got.incrementAndGet();
            });
            n.get(i).register(BytesRequest.class, req -> n.get(me).reply(req, BytesResponse.echo(req)));
        }
        // Both directions at once: the one thread sends and receives.
        Thread other = new Thread(() -> {
            try {
                for (int s = 0; s < perSide; s++) {
                    n.get(1).sendMessage(new DataMessage(0, 1, s, s % 100 == 0 ? 40_000 : s % 300));
                }
            } catch (NetworkException e) {
                problem.compareAndSet(null, e.toString());
            }
        }, "node1-sender");
        other.start();
        for (int s = 0; s < perSide; s++) {
            n.get(0).sendMessage(new DataMessage(1, 0, s, s % 100 == 0 ? 40_000 : s % 300));
        }
        other.join();
        waitFor("all messages", () -> (received.get(0).get() == perSide && received.get(1).get() == perSide)
                || problem.get() != null);
        assertEquals(null, problem.get());
        // Requests, some after an idle stretch long enough for the engine
        // threads to sleep (parking_sleep_after_us: 1 ms by default).
        for (int i = 0; i < 200; i++) {
            if (i % 20 == 0) {
                Thread.sleep(20);
            }
            long[] v = {i, -i};
            BytesResponse r = n.get(i % 2).sendSync(new BytesRequest(1 - i % 2, bytesOf(v)), 10_000);
            assertArrayEquals(v, longsOf(r.bytes));
        }
        Map<String, Long> st = n.get(0).transportStats();
        assertTrue(st.toString(), st.get("send_sleeps") > 0);
        // One thread counts both (its two stores may straddle this read).
        assertTrue(st.toString(), st.get("send_iterations") > 0 && Math.abs(st.get("send_iterations") - st.get("recv_iterations")) <= 1024);
        assertEquals(0, n.get(0).droppedMessages());
        assertEquals(0, n.get(1).droppedMessages());
    }
}
