package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * {@code handleOnReceivingThread}: handlers run on the transport's receiving
 * thread (in order per sender, failures answered as on the pool), and what
 * would make that thread wait for itself fails fast ({@code sendSync}) or is
 * deferred (a send without ring or window room). Run over every transport.
 */
public class HandleOnReceivingThreadTest extends EveryTransport {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private List<DXNet> start(int count, boolean here, Consumer<DXNetConfig> tune) throws Exception {
        List<DXNet> out = mesh(count, c -> {
            c.handleOnReceivingThread = here;
            tune.accept(c);
        });
        for (DXNet n : out) {
            n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        }
        return out;
    }

    /** Whether {@code name} is the receiving thread of node {@code node}'s transport in this run. */
    private boolean receivingThread(String name, int node) {
        switch (transport) {
            case "ib":
                return name.matches("ibdxnet-(recv|shared)-0*" + Integer.toHexString(node));
            case "nio":
                return name.equals("dxnet-nio-" + node);
            default:
                return name.startsWith("dxnet-loopback-"); // the sending node's pump delivers
        }
    }

    /**
     * One message at a time (each handled before the next is sent): every
     * handler runs on the receiving thread with the key set, on a handler
     * pool thread without it (the default).
     */
    @Test
    public void handlersRunOnTheReceivingThreadWhenSet() throws Exception {
        for (boolean here : new boolean[] {true, false}) {
            List<DXNet> n = start(2, here, c -> {});
            List<String> threads = java.util.Collections.synchronizedList(new ArrayList<>());
            n.get(1).register(DataMessage.class, d -> threads.add(Thread.currentThread().getName()));
            for (int s = 0; s < 100; s++) {
                n.get(0).sendMessage(new DataMessage(1, 0, s, 16));
                int handled = s + 1;
                waitFor("message " + s, () -> threads.size() == handled);
            }
            for (String t : threads) {
                assertTrue("handleOnReceivingThread=" + here + ": handled on " + t,
                        here ? receivingThread(t, 1) : t.startsWith("dxnet-handler-1-"));
            }
            long batches = n.get(1).transportStats().get("batches_handled_on_receiving_thread");
            assertTrue("handleOnReceivingThread=" + here + ": " + batches + " batches on the receiving thread",
                    here ? batches == 100 : batches == 0);
            for (DXNet d : n) {
                d.close();
            }
            nodes.clear();
        }
    }

    /**
     * A stream of one sender whose handler sends a message back through a
     * 4 KB window: sends that find no room are deferred, and while they wait
     * the pool takes the batches (whose sends wait), so both take turns. One
     * sender's messages are still handled in order, never two at once, and
     * the messages sent back arrive in that order.
     */
    @Test
    public void oneSendersOrderIsKept() throws Exception {
        List<DXNet> n = start(2, true, c -> {
            c.handlerThreads = 4;
            c.flowControlWindow = 4096;
        });
        int count = 20_000;
        AtomicInteger next = new AtomicInteger();
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger onReceiving = new AtomicInteger();
        AtomicInteger echoes = new AtomicInteger();
        AtomicReference<String> problem = new AtomicReference<>();
        n.get(0).register(DataMessage.class, d -> {
            // Sent from both threads, deferred or not: still in handling order.
            if (d.seq != echoes.getAndIncrement()) {
                problem.compareAndSet(null, "echo " + d.seq + " arrived when " + (echoes.get() - 1) + " was due");
            }
        });
        n.get(1).register(DataMessage.class, d -> {
            if (inside.incrementAndGet() != 1) {
                problem.compareAndSet(null, "two messages handled at once (seq " + d.seq + ")");
            }
            if (d.seq != next.get() || !d.intact()) {
                problem.compareAndSet(null, "seq " + d.seq + " handled when " + next.get() + " was due");
            }
            if (receivingThread(Thread.currentThread().getName(), 1)) {
                onReceiving.incrementAndGet();
            }
            next.set(d.seq + 1);
            inside.decrementAndGet();
            n.get(1).sendMessage(new DataMessage(0, 1, d.seq, d.seq % 2 == 0 ? 3_000 : 24));
        });
        for (int s = 0; s < count; s++) {
            n.get(0).sendMessage(new DataMessage(1, 0, s, s % 700 == 0 ? 3_000 : 24));
        }
        waitFor("all messages", () -> next.get() == count || problem.get() != null);
        assertNull(problem.get());
        assertEquals(count, next.get());
        waitFor("all echoes", () -> echoes.get() == count || problem.get() != null);
        assertNull(problem.get());
        int here = onReceiving.get();
        assertTrue(here + " of " + count + " on the receiving thread: both should take turns", here > 0 && here < count);
        assertTrue(n.get(1).transportStats().get("receiving_thread_sends_deferred") > 0);
        waitFor("no handler room held", () -> n.get(1).handlerBatchesQueued() == 0);
    }

    /**
     * A handler on the receiving thread that throws: its requester gets the
     * error reply at once, the failure is logged SEVERE and counted, and the
     * thread goes on handling (the next requests are answered).
     */
    @Test
    public void aThrowingHandlerIsAnsweredWithAnErrorAndTheThreadLivesOn() throws Exception {
        List<DXNet> n = start(2, true, c -> {});
        java.util.concurrent.atomic.AtomicReferenceArray<String> threads = new java.util.concurrent.atomic.AtomicReferenceArray<>(20);
        n.get(1).register(BytesRequest.class, req -> {
            long v = longsOf(req.bytes)[0];
            threads.set((int) v, Thread.currentThread().getName());
            if (v % 2 == 1) {
                throw new IllegalArgumentException("odd: " + v);
            }
            n.get(1).reply(req, BytesResponse.echo(req));
        });
        LogCapture log = new LogCapture();
        Logger logger = Logger.getLogger("io.ibdxnet.DXNet");
        logger.addHandler(log);
        try {
            for (long v = 0; v < 20; v++) {
                long t0 = System.nanoTime();
                try {
                    BytesResponse r = n.get(0).sendSync(new BytesRequest(1, bytesOf(v)), 10_000);
                    assertEquals(0, v % 2);
                    assertEquals(v, longsOf(r.bytes)[0]);
                } catch (RemoteHandlerException e) {
                    assertEquals(1, v % 2);
                    assertEquals(IllegalArgumentException.class.getName(), e.remoteClass());
                    assertTrue(e.getMessage(), e.getMessage().contains("odd: " + v));
                    long ms = (System.nanoTime() - t0) / 1_000_000;
                    assertTrue("the error reply took " + ms + " ms", ms < 5_000);
                }
            }
        } finally {
            logger.removeHandler(log);
        }
        assertEquals(10L, (long) n.get(1).transportStats().get("handler_errors"));
        LogRecord r = log.find("failed on a message of node 0");
        assertNotNull("SEVERE log of the failed handler", r);
        assertEquals(Level.SEVERE, r.getLevel());
        // The thread lives on: after each throw, the next request is handled
        // on it too. (A buffer can go to the pool by design, e.g. while a reply
        // waits for ring room: the counters say so if one did.)
        String why = threads + ", " + n.get(1).transportStats();
        int here = 0;
        int livedOn = 0;
        for (int v = 0; v < 20; v++) {
            assertNotNull("request " + v + " handled: " + why, threads.get(v));
            if (receivingThread(threads.get(v), 1)) {
                here++;
                if (v % 2 == 0 && v > 0 && receivingThread(threads.get(v - 1), 1)) {
                    livedOn++;
                }
            }
        }
        assertTrue("on the receiving thread: " + here + " of 20: " + why, here >= 16);
        assertTrue("a throw on the receiving thread, then the next request on it: " + livedOn + " times: " + why,
                livedOn >= 6);
    }

    /**
     * {@code sendSync} inside a handler on the receiving thread would wait for
     * its own thread: it throws at once, naming the setting (not a timeout).
     * From a pool handler (the default) the same handler gets its answer.
     */
    @Test
    public void sendSyncInAHandlerOnTheReceivingThreadFailsFast() throws Exception {
        for (boolean here : new boolean[] {true, false}) {
            List<DXNet> n = start(2, here, c -> c.requestTimeoutMs = 3_000);
            n.get(0).register(BytesRequest.class, req -> n.get(0).reply(req, BytesResponse.echo(req)));
            AtomicReference<Object> outcome = new AtomicReference<>();
            AtomicReference<Long> took = new AtomicReference<>();
            n.get(1).register(DataMessage.class, d -> {
                long t0 = System.nanoTime();
                try {
                    outcome.set(longsOf(n.get(1).sendSync(new BytesRequest(0, bytesOf(7L))).bytes)[0]);
                } catch (RuntimeException e) {
                    outcome.set(e);
                }
                took.set((System.nanoTime() - t0) / 1_000_000);
            });
            n.get(0).sendMessage(new DataMessage(1, 0, 0, 16));
            waitFor("the handler's sendSync returned", () -> took.get() != null);
            if (here) {
                assertTrue("sendSync threw: " + outcome.get(), outcome.get() instanceof IllegalStateException);
                String msg = ((Exception) outcome.get()).getMessage();
                assertTrue(msg, msg.contains("handleOnReceivingThread"));
                assertTrue("failed after " + took.get() + " ms", took.get() < 1_000);
            } else {
                assertEquals(7L, outcome.get());
            }
            for (DXNet d : n) {
                d.close();
            }
            nodes.clear();
        }
    }

    /**
     * Both nodes ask each other at once through a 4 KB window, their handlers
     * replying on the receiving thread: replies that find no room are
     * deferred (counted), never waited for on that thread, and every request
     * is answered (no deadlock, no timeout).
     */
    @Test
    public void repliesUnderLoadThroughASmallWindowDoNotDeadlock() throws Exception {
        repliesUnderLoad(false);
    }

    /**
     * The same on ib with {@code native.engine_threads=shared}: the one engine
     * thread that sends and receives runs the handlers (its name in them).
     */
    @Test
    public void repliesUnderLoadOnTheSharedEngineThread() throws Exception {
        org.junit.Assume.assumeTrue("ib only", transport.equals("ib"));
        repliesUnderLoad(true);
    }

    private void repliesUnderLoad(boolean shared) throws Exception {
        List<DXNet> n = start(2, true, c -> {
            c.flowControlWindow = 4096;
            c.requestTimeoutMs = 20_000;
            if (shared) {
                c.nativeConfig.put("engine_threads", "shared");
            }
        });
        Map<String, Boolean> threads = new ConcurrentHashMap<>();
        for (DXNet d : n) {
            d.register(BytesRequest.class, req -> {
                threads.put(Thread.currentThread().getName(), true);
                d.reply(req, new BytesResponse(req, new byte[600]));
            });
        }
        int count = 3_000;
        AtomicReference<Throwable> problem = new AtomicReference<>();
        List<Thread> askers = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            DXNet from = n.get(i);
            int to = 1 - i;
            Thread t = new Thread(() -> {
                Semaphore inFlight = new Semaphore(32);
                try {
                    for (int r = 0; r < count && problem.get() == null; r++) {
                        inFlight.acquire();
                        CompletableFuture<BytesResponse> f = from.sendAsync(new BytesRequest(to, new byte[500]));
                        f.whenComplete((resp, e) -> {
                            if (e != null) {
                                problem.compareAndSet(null, e);
                            } else if (resp.bytes.length != 600) {
                                problem.compareAndSet(null, new AssertionError(resp.bytes.length + " bytes"));
                            }
                            inFlight.release();
                        });
                    }
                    if (!inFlight.tryAcquire(32, 30, TimeUnit.SECONDS)) {
                        problem.compareAndSet(null, new AssertionError("answers missing"));
                    }
                } catch (InterruptedException e) {
                    problem.compareAndSet(null, e);
                }
            }, "asker-" + i);
            t.start();
            askers.add(t);
        }
        for (Thread t : askers) {
            t.join();
        }
        if (problem.get() != null) {
            throw new AssertionError("a request failed", problem.get());
        }
        long deferred = 0;
        long early = 0;
        for (DXNet d : n) {
            Map<String, Long> s = d.transportStats();
            assertEquals(0L, (long) s.get("replies_failed"));
            early += s.get("confirmed_before_handled");
            assertTrue(s.get("batches_handled_on_receiving_thread") > 0);
            deferred += s.get("receiving_thread_sends_deferred");
        }
        assertTrue("replies were deferred for want of room: " + deferred, deferred > 0);
        // Each node's window full of requests the other has not handled: the
        // waits for the window broke the cycle by confirming early.
        assertTrue("confirmed before handled: " + early, early > 0);
        for (String t : threads.keySet()) {
            assertTrue("handled on " + t, receivingThread(t, 0) || receivingThread(t, 1) || t.startsWith("dxnet-handler-"));
        }
        assertTrue("handled on the receiving thread: " + threads.keySet(),
                threads.keySet().stream().anyMatch(t -> receivingThread(t, 0) || receivingThread(t, 1)));
        if (shared) {
            assertTrue("handled on the shared engine thread: " + threads.keySet(),
                    threads.keySet().stream().allMatch(t -> !t.startsWith("ibdxnet-recv-"))
                            && threads.keySet().stream().anyMatch(t -> t.startsWith("ibdxnet-shared-")));
        }
    }

    /**
     * Node 0 stops reading node 1 (its handler blocks, node 1's share fills);
     * node 1's handler on the receiving thread sends it messages, then a
     * reply: they are deferred, fail at {@code handlerSendTimeoutMs}, and that
     * is logged and, for the reply, counted in {@code replies_failed}.
     */
    @Test
    public void aDeferredSendThatFailsIsLoggedAndAReplyCounted() throws Exception {
        List<DXNet> n = start(2, true, c -> {
            c.flowControlWindow = 4096;
            c.handlerQueueBytesPerSource = 1024;
            c.handlerSendTimeoutMs = 300;
            c.requestTimeoutMs = 3_000;
        });
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        n.get(0).register(DataMessage.class, d -> release.await());
        n.get(1).register(BytesRequest.class, req -> {
            for (int i = 0; i < 50; i++) {
                n.get(1).sendMessage(new DataMessage(0, 1, i, 1_000));
            }
            n.get(1).reply(req, BytesResponse.echo(req));
        });
        LogCapture log = new LogCapture();
        Logger logger = Logger.getLogger("io.ibdxnet.DXNet");
        logger.addHandler(log);
        try {
            CompletableFuture<BytesResponse> f = n.get(0).sendAsync(new BytesRequest(1, bytesOf(1L)));
            waitFor("the reply failed", 20_000, () -> n.get(1).transportStats().get("replies_failed") > 0);
            assertTrue(n.get(1).transportStats().get("receiving_thread_sends_deferred") > 0);
            LogRecord r = log.find("(deferred) was not sent");
            assertNotNull("a log line for the deferred send that failed", r);
            assertEquals(Level.WARNING, r.getLevel());
            waitFor("the request timed out", f::isDone);
            assertTrue(f.isCompletedExceptionally());
        } finally {
            logger.removeHandler(log);
            release.countDown();
        }
    }

    /** {@code close} from a handler on the receiving thread returns, and the node closes (on another thread). */
    @Test
    public void closeFromAHandlerOnTheReceivingThread() throws Exception {
        List<DXNet> n = start(2, true, c -> {});
        AtomicReference<String> closedOn = new AtomicReference<>();
        n.get(1).register(DataMessage.class, d -> {
            n.get(1).close();
            closedOn.set(Thread.currentThread().getName());
        });
        n.get(0).sendMessage(new DataMessage(1, 0, 0, 16));
        waitFor("close returned in the handler", () -> closedOn.get() != null);
        assertTrue(closedOn.get(), receivingThread(closedOn.get(), 1));
        try {
            waitFor("node 1 closed", () -> {
                try {
                    n.get(1).sendMessage(new DataMessage(0, 0, 1, 16));
                    return false;
                } catch (NetworkException e) {
                    return e.reason() == FailureReason.CLOSED;
                }
            });
        } catch (AssertionError e) {
            fail("node 1 did not close: " + e.getMessage());
        }
    }
}
