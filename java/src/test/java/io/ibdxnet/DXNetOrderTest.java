package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Handling order with the default configuration ({@code orderPerSender}):
 * one sender's messages one at a time in order, different senders in
 * parallel; and the opt-out. Run over every transport.
 */
public class DXNetOrderTest extends EveryTransport {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    /** {@code count} nodes that know each other; defaults except what {@code tune} sets (and small sim engines). */
    private List<DXNet> start(int count, Consumer<DXNetConfig> tune) throws Exception {
        List<DXNet> out = mesh(count, tune);
        for (DXNet n : out) {
            n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        }
        return out;
    }

    /** 10^5 messages from one sender, four handler threads, nothing else configured: handled in order, never two at once. */
    @Test
    public void oneSendersStreamIsHandledInOrderWithFourHandlerThreads() throws Exception {
        List<DXNet> n = start(2, c -> c.handlerThreads = 4);
        int count = 100_000;
        AtomicInteger next = new AtomicInteger();
        AtomicInteger inside = new AtomicInteger();
        AtomicReference<String> problem = new AtomicReference<>();
        n.get(1).register(DataMessage.class, d -> {
            if (inside.incrementAndGet() != 1) {
                problem.compareAndSet(null, "two messages of node 0 handled at once (seq " + d.seq + ")");
            }
            int expected = next.get();
            if (d.seq != expected || !d.intact() || d.getSource() != 0) {
                problem.compareAndSet(null, "seq " + d.seq + " handled when " + expected + " was due");
            }
            next.set(d.seq + 1);
            inside.decrementAndGet();
        });
        for (int s = 0; s < count; s++) {
            n.get(0).sendMessage(new DataMessage(1, 0, s, s % 1000 == 999 ? 20_000 : 16));
        }
        waitFor("all messages", () -> next.get() == count || problem.get() != null);
        assertEquals(null, problem.get());
        assertEquals(count, next.get());
    }

    /**
     * With {@code receiveInline} the transport's thread parses a buffer itself
     * only while none waits for the coordinator; a tiny handler queue and a
     * handler that stalls now and then make both paths take turns mid-stream.
     * One sender's messages still arrive whole and in order, on either setting.
     */
    @Test
    public void inlineAndCoordinatorTakingTurnsKeepOneSendersOrder() throws Exception {
        for (boolean inline : new boolean[] {true, false}) {
            List<DXNet> n = start(2, c -> {
                c.handlerThreads = 2;
                c.handlerQueueSize = 2;
                c.receiveInline = inline;
            });
            int count = 30_000;
            AtomicInteger next = new AtomicInteger();
            AtomicReference<String> problem = new AtomicReference<>();
            n.get(1).register(DataMessage.class, d -> {
                int expected = next.get();
                if (d.seq != expected || !d.intact()) {
                    problem.compareAndSet(null, "seq " + d.seq + " handled when " + expected + " was due");
                }
                next.set(d.seq + 1);
                if (d.seq % 5_000 == 0) {
                    TimeUnit.MILLISECONDS.sleep(20); // the queue fills up behind this
                }
            });
            for (int s = 0; s < count; s++) {
                n.get(0).sendMessage(new DataMessage(1, 0, s, s % 700 == 0 ? 9_000 : 24));
                if (s % 1_000 == 0) {
                    Thread.sleep(1); // idle moments: the coordinator drains, inline becomes possible
                }
            }
            waitFor("all messages, receiveInline=" + inline, () -> next.get() == count || problem.get() != null);
            assertEquals(null, problem.get());
            // Responses only (no batch for a handler): the handler room reserved for
            // each inline buffer goes back, none leaks.
            n.get(1).register(BytesRequest.class, req -> n.get(1).reply(req, BytesResponse.echo(req)));
            for (int r = 0; r < 200; r++) {
                assertEquals(r, longsOf(n.get(0).sendSync(new BytesRequest(1, bytesOf(new long[] {r})), 10_000).bytes)[0]);
            }
            for (DXNet d : n) {
                waitFor("no handler room held on node " + d.nodeId(), () -> d.handlerBatchesQueued() == 0);
            }
            long inlined = n.get(1).transportStats().get("buffers_received_inline");
            assertEquals("receiveInline=" + inline + ": " + inlined + " buffers inline", inline, inlined > 0);
            if (inline) {
                assertTrue("responses parsed inline on node 0", n.get(0).transportStats().get("buffers_received_inline") > 0);
            }
            for (DXNet d : n) {
                d.close();
            }
            nodes.clear();
        }
    }

    /**
     * Node 2's handler blocks on node 0's first message: node 1's messages are
     * handled meanwhile, node 0's second waits for its first; after the
     * release node 0's messages follow in order.
     */
    @Test
    public void aSlowHandlerForOneSenderDoesNotHoldUpAnother() throws Exception {
        List<DXNet> n = start(3, c -> {});
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch blocked = new CountDownLatch(1);
        AtomicLong fromOne = new AtomicLong();
        List<Integer> fromZero = java.util.Collections.synchronizedList(new ArrayList<>());
        n.get(2).register(DataMessage.class, d -> {
            if (d.getSource() == 1) {
                fromOne.incrementAndGet();
                return;
            }
            fromZero.add(d.seq);
            if (d.seq == 0) {
                blocked.countDown();
                assertTrue("never released", release.await(60, TimeUnit.SECONDS));
            }
        });
        n.get(0).sendMessage(new DataMessage(2, 0, 0, 8));
        assertTrue("node 0's first message never handled", blocked.await(30, TimeUnit.SECONDS));
        for (int s = 1; s < 100; s++) {
            n.get(0).sendMessage(new DataMessage(2, 0, s, 8));
        }
        int count = 5_000;
        for (int s = 0; s < count; s++) {
            n.get(1).sendMessage(new DataMessage(2, 1, s, 8));
        }
        waitFor("node 1's messages while node 0's handler blocks", () -> fromOne.get() == count);
        assertEquals("node 0's later messages waited for its first", 1, fromZero.size());
        release.countDown();
        waitFor("node 0's messages", () -> fromZero.size() == 100);
        for (int s = 0; s < 100; s++) {
            assertEquals((Integer) s, fromZero.get(s));
        }
    }

    /**
     * A handler of node 0's message waits for a response from node 0, which
     * arrives behind nothing: responses complete their future as they arrive,
     * not in node 0's lane (which the waiting handler occupies).
     */
    @Test
    public void aHandlerCanWaitForAResponseFromTheNodeWhoseMessageItHandles() throws Exception {
        List<DXNet> n = start(2, c -> c.handlerThreads = 1);
        n.get(0).register(BytesRequest.class, req -> n.get(0).reply(req, BytesResponse.echo(req)));
        AtomicReference<Object> answer = new AtomicReference<>();
        n.get(1).register(DataMessage.class, d -> {
            BytesResponse r = n.get(1).sendSync(new BytesRequest(0, bytesOf(new long[] {d.seq})), 10_000);
            answer.set(longsOf(r.bytes)[0]);
        });
        n.get(0).sendMessage(new DataMessage(1, 0, 77, 8));
        waitFor("the handler's answer", () -> answer.get() != null);
        assertEquals(77L, answer.get());
    }

    /** {@code orderPerSender = false}: a second message of the same sender is handled while its first still runs. */
    @Test
    public void withoutOrderPerSenderOneSendersMessagesRunConcurrently() throws Exception {
        List<DXNet> n = start(2, c -> {
            c.handlerThreads = 2;
            c.orderPerSender = false;
        });
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch firstIn = new CountDownLatch(1);
        CountDownLatch secondDone = new CountDownLatch(1);
        n.get(1).register(DataMessage.class, d -> {
            if (d.seq == 0) {
                firstIn.countDown();
                release.await(60, TimeUnit.SECONDS);
            } else {
                secondDone.countDown();
            }
        });
        try {
            n.get(0).sendMessage(new DataMessage(1, 0, 0, 8));
            assertTrue("the first message never handled", firstIn.await(30, TimeUnit.SECONDS));
            n.get(0).sendMessage(new DataMessage(1, 0, 1, 8));
            assertTrue("the second message waited behind the first", secondDone.await(30, TimeUnit.SECONDS));
        } finally {
            release.countDown();
        }
    }

    /** The default waits: the second message is not handled while the first still runs. */
    @Test
    public void withOrderPerSenderTheSecondMessageWaitsForTheFirst() throws Exception {
        List<DXNet> n = start(2, c -> c.handlerThreads = 2);
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch firstIn = new CountDownLatch(1);
        CountDownLatch secondDone = new CountDownLatch(1);
        n.get(1).register(DataMessage.class, d -> {
            if (d.seq == 0) {
                firstIn.countDown();
                release.await(60, TimeUnit.SECONDS);
            } else {
                secondDone.countDown();
            }
        });
        n.get(0).sendMessage(new DataMessage(1, 0, 0, 8));
        assertTrue("the first message never handled", firstIn.await(30, TimeUnit.SECONDS));
        n.get(0).sendMessage(new DataMessage(1, 0, 1, 8));
        assertFalse("the second message ran beside the first", secondDone.await(300, TimeUnit.MILLISECONDS));
        release.countDown();
        assertTrue("the second message never handled", secondDone.await(30, TimeUnit.SECONDS));
    }
}
