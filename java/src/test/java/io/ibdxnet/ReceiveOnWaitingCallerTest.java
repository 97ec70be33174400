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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * ib on sim, engine key {@code recv_from_caller} (on by default): a thread
 * in {@code sendSync} whose node's receive thread sleeps polls the receive
 * side itself. Its responses come (the counter says it received them), the
 * messages it receives meanwhile arrive in order and are handled on their
 * usual threads, never on the waiting one (also with
 * {@code handleOnReceivingThread}), and with the key off nothing is received
 * on a caller.
 */
public class ReceiveOnWaitingCallerTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
        nodes.clear();
    }

    private List<DXNet> start(boolean onReceivingThread, String recvFromCaller) throws Exception {
        List<DXNet> n = TestSupport.mesh("ib", 2, c -> {
            c.handleOnReceivingThread = onReceivingThread;
            c.nativeConfig.put("recv_from_caller", recvFromCaller);
        }, nodes);
        for (DXNet d : n) {
            d.registerMessageType(DataMessage.TYPE, DataMessage.DATA, DataMessage.class);
            d.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
            d.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        }
        return n;
    }

    /**
     * Node 0 sends requests after pauses (its receive thread falls asleep);
     * node 1 sends node 0 a message before each answer, which arrives while
     * node 0's requester waits, and one after. Returns node 0's counters.
     */
    private Map<String, Long> requestsAfterPauses(boolean onReceivingThread, String recvFromCaller) throws Exception {
        List<DXNet> n = start(onReceivingThread, recvFromCaller);
        AtomicReference<String> problem = new AtomicReference<>();
        AtomicLong got = new AtomicLong();
        Map<String, Boolean> requesters = new ConcurrentHashMap<>();
        n.get(0).register(DataMessage.TYPE, DataMessage.DATA, m -> {
            DataMessage d = (DataMessage) m;
            if (d.seq != got.get() || !d.intact()) {
                problem.compareAndSet(null, "message " + d.seq + " where " + got.get() + " was due, intact " + d.intact());
            }
            if (requesters.containsKey(Thread.currentThread().getName())) {
                problem.compareAndSet(null, "message " + d.seq + " handled on the waiting requester's thread");
            }
            got.incrementAndGet();
        });
        AtomicLong sent = new AtomicLong();
        n.get(1).register(BytesRequest.class, req -> {
            try {
                send(n.get(1), sent);
                n.get(1).reply(req, BytesResponse.echo(req));
                // After the answer: it comes while the requester ends its wait
                // (its last look may receive it) or after.
                send(n.get(1), sent);
            } catch (NetworkException e) {
                problem.compareAndSet(null, e.toString());
            }
        });
        requesters.put(Thread.currentThread().getName(), true);
        for (int i = 0; i < 150; i++) {
            Thread.sleep(i % 3 == 0 ? 5 : 1); // longer than parking_sleep_after_us (1 ms): the receive thread sleeps
            long[] v = {i, ~i};
            BytesResponse r = n.get(0).sendSync(new BytesRequest(1, bytesOf(v)), 10_000);
            assertArrayEquals(v, longsOf(r.bytes));
        }
        waitFor("every message at node 0", () -> got.get() == sent.get() || problem.get() != null);
        assertEquals(null, problem.get());
        assertEquals(0, n.get(0).droppedMessages());
        Map<String, Long> st = n.get(0).transportStats();
        closeAll();
        return st;
    }

    private static void send(DXNet from, AtomicLong sent) throws NetworkException {
        int s = (int) sent.getAndIncrement();
        from.sendMessage(new DataMessage(0, 1, s, s % 500));
    }

    @Test
    public void aWaitingRequesterReceivesItsResponsesAndHandlesNothingItself() throws Exception {
        for (boolean here : new boolean[] {false, true}) {
            Map<String, Long> st = requestsAfterPauses(here, "true");
            // Most waits find the thread asleep; some responses come to the requester itself.
            assertTrue("handleOnReceivingThread " + here + ": " + st, st.get("recv_caller_runs") >= 20);
        }
    }

    @Test
    public void withTheKeyOffNothingIsReceivedOnACaller() throws Exception {
        Map<String, Long> st = requestsAfterPauses(true, "false");
        assertEquals(st.toString(), 0L, (long) st.get("recv_caller_runs"));
    }
}
