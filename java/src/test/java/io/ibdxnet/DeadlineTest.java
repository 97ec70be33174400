package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;

/**
 * One deadline per call (connecting, ring and window waits, the answer), and
 * async calls that never block: over every transport where the scenario
 * applies. An unreachable node: on {@code nio} a port that accepts TCP but
 * never answers the hello, on {@code ib} a UDP port where nobody answers the
 * connection manager, on {@code loopback} a port without a node (fails at once).
 */
@RunWith(Parameterized.class)
public class DeadlineTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return new Object[] {"ib", "nio", "loopback"};
    }

    @Parameterized.Parameter
    public String transport;

    private static final int UNREACHABLE = 7;
    private final List<DXNet> nodes = new ArrayList<>();
    private final List<AutoCloseable> silent = new ArrayList<>();
    /** Latches that hold a handler (heldPair): opened after every test, passed or not. */
    private final List<CountDownLatch> held = new ArrayList<>();

    @After
    public void closeAll() throws Exception {
        for (CountDownLatch l : held) {
            l.countDown(); // a test that failed while a handler was held must not leave its thread waiting
        }
        for (DXNet n : nodes) {
            n.close();
        }
        for (AutoCloseable s : silent) {
            s.close();
        }
    }

    private List<DXNet> start(int count, Consumer<DXNetConfig> tune) throws Exception {
        List<DXNet> out = TestSupport.mesh(transport, count, c -> {
            c.connectTimeoutMs = 10_000;
            c.sendTimeoutMs = 10_000;
            tune.accept(c);
        }, nodes);
        for (DXNet n : out) {
            n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
            n.registerMessageType(DataMessage.TYPE, DataMessage.DATA, DataMessage.class);
        }
        return out;
    }

    /** Adds node {@link #UNREACHABLE} to {@code n}'s table at an address where nobody answers. */
    private void addUnreachable(DXNet n) throws Exception {
        int port;
        if (transport.equals("nio")) {
            ServerSocket s = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1")); // never accepts: no hello back
            silent.add(s);
            port = s.getLocalPort();
        } else if (transport.equals("ib")) {
            DatagramSocket s = new DatagramSocket(0, InetAddress.getByName("127.0.0.1")); // never answers
            silent.add(s);
            port = s.getLocalPort();
        } else {
            port = TestPorts.freePort(); // no loopback node there
        }
        n.addNode(UNREACHABLE, "127.0.0.1:" + port);
    }

    @Test
    public void sendSyncToAnUnreachableNodeFailsWithinItsTimeoutNotTheConnectTimeout() throws Exception {
        DXNet a = start(1, c -> {}).get(0);
        addUnreachable(a);
        long t0 = System.nanoTime();
        try {
            a.sendSync(new BytesRequest(UNREACHABLE, new byte[8]), 2_000);
            fail("a request to an unreachable node was answered");
        } catch (NetworkException expected) {
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            System.out.println(transport + ": sendSync(req, 2000) to an unreachable node failed after " + ms + " ms: "
                    + expected.getMessage());
            assertTrue("took " + ms + " ms: " + expected.getMessage(), ms < 3_000);
            if (!transport.equals("loopback")) {
                assertTrue(expected.getMessage(), expected.getMessage().contains("caller's deadline"));
            }
        }
        assertEquals(0, a.pendingRequests());
    }

    /**
     * Closing a node does not wait out a send that waits for a connection (on
     * ib the engine's close waited for the native connect's whole timeout:
     * a drop notice to a peer that had just left held a close for 10 s).
     */
    @Test
    public void closeEndsASendWaitingForAConnectionAtOnce() throws Exception {
        DXNet a = start(1, c -> {}).get(0);
        addUnreachable(a);
        AtomicReference<Throwable> outcome = new AtomicReference<>();
        CountDownLatch ended = new CountDownLatch(1);
        Thread waiting = new Thread(() -> {
            try {
                a.sendMessage(new DataMessage(UNREACHABLE, 1, 2, 8)); // waits up to the 10 s send timeout
            } catch (Throwable t) {
                outcome.set(t);
            }
            ended.countDown();
        });
        waiting.start();
        Thread.sleep(300); // it waits for the connection by now (loopback: it failed at once)
        long t0 = System.nanoTime();
        a.close();
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        System.out.println(transport + ": close with a send waiting for a connection took " + ms + " ms");
        assertTrue("close took " + ms + " ms", ms < 3_000);
        assertTrue("the send still waits", ended.await(3, TimeUnit.SECONDS));
        assertTrue(String.valueOf(outcome.get()), outcome.get() instanceof NetworkException);
    }

    /** A caller with less time does not wait out another caller's longer connect (the connect lock is timed too). */
    @Test
    public void aCallerDoesNotWaitOutAnotherCallersLongerConnect() throws Exception {
        DXNet a = start(1, c -> {}).get(0);
        addUnreachable(a);
        Thread patient = new Thread(() -> {
            try {
                a.sendSync(new BytesRequest(UNREACHABLE, new byte[8]), 5_000);
            } catch (NetworkException expected) {
                // unreachable
            }
        });
        patient.start();
        // It holds the connect lock now (on ib; on nio only briefly): a time, not a
        // condition, as the connect waits in native code (its thread RUNNABLE).
        Thread.sleep(200);
        long t0 = System.nanoTime();
        try {
            a.sendSync(new BytesRequest(UNREACHABLE, new byte[8]), 2_000);
            fail("a request to an unreachable node was answered");
        } catch (NetworkException expected) {
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            System.out.println(transport + ": behind a connect of 5 s, sendSync(req, 2000) failed after " + ms + " ms: "
                    + expected.getMessage());
            assertTrue("took " + ms + " ms: " + expected.getMessage(), ms < 3_000);
        }
        patient.join();
    }

    @Test
    public void sendAsyncToAnUnreachableNodeReturnsAtOnceAndItsFutureFailsWithinTheTimeout() throws Exception {
        DXNet a = start(1, c -> {}).get(0);
        addUnreachable(a);
        long t0 = System.nanoTime();
        CompletableFuture<BytesResponse> f = a.sendAsync(new BytesRequest(UNREACHABLE, new byte[8]), 2_000);
        long returnedUs = TimeUnit.NANOSECONDS.toMicros(System.nanoTime() - t0);
        try {
            f.get(3_000, TimeUnit.MILLISECONDS);
            fail("a request to an unreachable node was answered");
        } catch (ExecutionException expected) {
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            System.out.println(transport + ": sendAsync returned after " + returnedUs + " µs, its future failed after " + ms
                    + " ms: " + expected.getCause());
            assertTrue(String.valueOf(expected.getCause()), expected.getCause() instanceof NetworkException);
        }
        assertTrue("sendAsync blocked for " + returnedUs + " µs", returnedUs < 50_000);
        waitFor("the pending request is gone", 1_000, () -> a.pendingRequests() == 0);
    }

    /**
     * Two nodes with a 256 KiB window; node 1 answers BytesRequests only once
     * {@code release} opens, and its one held handler stops the parsing, so
     * node 0's window to it fills. Returns node 0.
     */
    private DXNet heldPair(CountDownLatch release, Consumer<DXNetConfig> more) throws Exception {
        held.add(release);
        List<DXNet> n = start(2, c -> {
            c.handlerThreads = 1;
            c.handlerQueueSize = 4;
            c.flowControlWindow = 256 << 10;
            more.accept(c);
        });
        n.get(1).register(BytesRequest.class, r -> {
            release.await();
            n.get(1).reply(r, new BytesResponse(r, r.bytes));
        });
        return n.get(0);
    }

    @Test
    public void sendAsyncToANodeWhoseWindowIsFullReturnsAtOnce() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        // A window smaller than a send ring starts (RingProducerSide.START_WINDOW): the window is what fills.
        // A ring grows only while its sends are posted and not confirmed; with the receiver held early it may
        // stay small, and fill before a larger window does (CI saw 139 384 of 262 144 bytes for 20 s on loopback).
        long window = 32 << 10;
        DXNet a = heldPair(release, c -> c.flowControlWindow = window);
        int first = 2_000; // 2 000 × 1 KiB: sixty windows
        int more = 200; // sent once the window is seen full: each of these finds it full
        int count = first + more;
        List<CompletableFuture<BytesResponse>> futures = new ArrayList<>();
        long[] us = new long[count];
        long full = 0;
        for (int i = 0; i < count; i++) {
            if (i == first) {
                // A loaded host may not yet have moved the first sends into the window
                // (they wait deferred meanwhile); the rest go out once it is seen full.
                long[] seen = {full};
                waitFor("the window never filled: " + full, 20_000, () -> {
                    seen[0] = Math.max(seen[0], a.transportStats().get("unconfirmed_bytes"));
                    return seen[0] > window * 3 / 4;
                });
                full = seen[0];
            }
            long t0 = System.nanoTime();
            byte[] payload = new byte[1024];
            System.arraycopy(bytesOf(i), 0, payload, 0, 8);
            futures.add(a.sendAsync(new BytesRequest(1, payload), 60_000));
            us[i] = TimeUnit.NANOSECONDS.toMicros(System.nanoTime() - t0);
            // A send that waits for the window would take sendTimeoutMs (10 s); a loaded host may
            // deschedule us for tens of ms, which is not the call blocking.
            assertTrue("sendAsync " + i + " blocked for " + us[i] + " µs", us[i] < 1_000_000);
            full = Math.max(full, a.transportStats().get("unconfirmed_bytes"));
        }
        long[] sorted = us.clone();
        java.util.Arrays.sort(sorted);
        long[] last = java.util.Arrays.copyOfRange(us, first, count);
        java.util.Arrays.sort(last);
        System.out.println(transport + ": " + count + " sendAsync to a node whose handler is held: median "
                + sorted[count / 2] + " µs, 99th percentile " + sorted[count * 99 / 100] + " µs, slowest " + sorted[count - 1]
                + " µs; the " + more + " sent to a full window: median " + last[more / 2] + " µs; unconfirmed bytes reached "
                + full);
        assertTrue("the window emptied while the handler was held: " + a.transportStats().get("unconfirmed_bytes"),
                a.transportStats().get("unconfirmed_bytes") > window * 3 / 4);
        assertTrue("median sendAsync took " + sorted[count / 2] + " µs", sorted[count / 2] < 1_000);
        assertTrue("median sendAsync to a full window took " + last[more / 2] + " µs", last[more / 2] < 1_000);
        release.countDown();
        for (int i = 0; i < count; i++) {
            assertEquals(i, longsOf(futures.get(i).get(30, TimeUnit.SECONDS).bytes)[0]);
        }
    }

    /**
     * Async requests to a node whose handler is held pile up behind the full
     * window; once {@code maxDeferredBytesPerNode} (64 KiB here) wait, the
     * next one's future fails at once with OVERLOADED instead of queueing
     * without end, and every request taken is answered once the handler goes on.
     */
    @Test
    public void asyncRequestsBeyondTheDeferredLimitFailAtOnceAsOverloaded() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        DXNet a = heldPair(release, c -> c.maxDeferredBytesPerNode = 64 << 10);
        List<CompletableFuture<BytesResponse>> taken = new ArrayList<>();
        Throwable refused = null;
        for (int i = 0; i < 2_000 && refused == null; i++) { // 2 000 × 1 KiB: eight windows
            CompletableFuture<BytesResponse> f = a.sendAsync(new BytesRequest(1, new byte[1024]), 60_000);
            if (f.isCompletedExceptionally()) {
                try {
                    f.get();
                } catch (ExecutionException e) {
                    refused = e.getCause();
                }
            } else {
                taken.add(f);
            }
        }
        System.out.println(transport + ": " + taken.size() + " async requests of 1 KiB taken before one was refused: "
                + refused);
        assertTrue("no request was refused", refused instanceof NetworkException);
        assertEquals(FailureReason.OVERLOADED, ((NetworkException) refused).reason());
        assertTrue(refused.getMessage(), refused.getMessage().contains("(maxDeferredBytesPerNode = 65536)"));
        // The window's 256 KiB and 64 KiB waiting, with room for what the transport holds besides.
        assertTrue("taken: " + taken.size(), taken.size() < 1_000);
        release.countDown();
        for (CompletableFuture<BytesResponse> f : taken) {
            f.get(30, TimeUnit.SECONDS);
        }
        waitFor("no request left pending", () -> a.pendingRequests() == 0);
    }

    @Test
    public void tenThousandAsyncRequestsSentWhileConnectingArriveInOrder() throws Exception {
        List<DXNet> n = start(2, c -> {});
        AtomicInteger next = new AtomicInteger();
        AtomicReference<String> problem = new AtomicReference<>();
        n.get(1).register(BytesRequest.class, r -> {
            long seq = longsOf(r.bytes)[0];
            if (seq != next.getAndIncrement()) {
                problem.compareAndSet(null, "request " + seq + " arrived when " + (next.get() - 1) + " was due");
            }
            n.get(1).reply(r, new BytesResponse(r, r.bytes));
        });
        // At least 10 000, and 1 000 more after the first answer: the stream spans the
        // connect (deferred) and what follows it (inline once the lane is clear).
        List<CompletableFuture<BytesResponse>> futures = new ArrayList<>();
        int answeredAt = -1;
        for (int i = 0; i < 10_000 || answeredAt < 0 || i < answeredAt + 1_000; i++) {
            futures.add(n.get(0).sendAsync(new BytesRequest(1, bytesOf(i)), 60_000));
            if (answeredAt < 0 && futures.get(0).isDone()) {
                answeredAt = i;
            }
            assertTrue("no answer after 10^6 requests", i < 1_000_000);
        }
        int count = futures.size();
        System.out.println(transport + ": " + count + " async requests, the first answered when " + answeredAt + " were sent");
        for (CompletableFuture<BytesResponse> f : futures) {
            f.get(60, TimeUnit.SECONDS);
        }
        assertNull(problem.get());
        assertEquals(count, next.get());
    }

    /**
     * A synchronous send after async ones that were deferred (the receiver's
     * handler is held, so its window is full) waits behind them: it arrives
     * after every one of them.
     */
    @Test
    public void aSyncSendAfterDeferredAsyncOnesArrivesAfterThem() throws Exception {
        List<DXNet> n = start(2, c -> {
            c.handlerThreads = 1;
            c.handlerQueueSize = 4;
            c.flowControlWindow = 256 << 10;
        });
        int count = 2_000;
        AtomicInteger requests = new AtomicInteger();
        AtomicReference<String> problem = new AtomicReference<>();
        CountDownLatch marker = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        held.add(release);
        n.get(1).register(BytesRequest.class, r -> {
            release.await();
            requests.incrementAndGet();
            n.get(1).reply(r, new BytesResponse(r, r.bytes));
        });
        n.get(1).register(DataMessage.class, d -> {
            if (requests.get() != count) {
                problem.compareAndSet(null, "the synchronous message arrived after " + requests.get() + " of " + count
                        + " requests sent before it");
            }
            marker.countDown();
        });
        List<CompletableFuture<BytesResponse>> futures = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            futures.add(n.get(0).sendAsync(new BytesRequest(1, new byte[1024]), 60_000)); // most of them deferred
        }
        AtomicReference<Throwable> syncFailure = new AtomicReference<>();
        Thread sync = new Thread(() -> {
            try {
                n.get(0).sendMessage(new DataMessage(1, 0, 0, 16));
            } catch (Throwable e) {
                syncFailure.set(e);
            }
        });
        sync.start();
        TestSupport.awaitWaiting(sync); // the synchronous send waits now
        release.countDown();
        sync.join();
        assertNull(syncFailure.get());
        assertTrue(marker.await(30, TimeUnit.SECONDS));
        assertNull(problem.get());
        for (CompletableFuture<BytesResponse> f : futures) {
            f.get(30, TimeUnit.SECONDS);
        }
    }

    /** The fast path: with the connection up and room, an async request is written in place at once, never queued. */
    @Test
    public void withTheConnectionUpAsyncRequestsAreWrittenInPlaceInline() throws Exception {
        List<DXNet> n = start(2, c -> {});
        n.get(1).register(BytesRequest.class, r -> n.get(1).reply(r, new BytesResponse(r, r.bytes)));
        n.get(0).sendSync(new BytesRequest(1, bytesOf(-1)), 10_000); // connected
        long copiedBefore = n.get(0).transportStats().get("messages_copied");
        List<CompletableFuture<BytesResponse>> futures = new ArrayList<>();
        for (int i = 0; i < 1_000; i++) {
            futures.add(n.get(0).sendAsync(new BytesRequest(1, bytesOf(i)), 10_000)); // 1 000 × 40 B: far below the window
        }
        for (CompletableFuture<BytesResponse> f : futures) {
            f.get(10, TimeUnit.SECONDS);
        }
        assertEquals("async requests serialised for the queue", copiedBefore,
                (long) n.get(0).transportStats().get("messages_copied"));
    }

    @Test
    public void sendAsyncReportsFailuresThroughItsFutureAndThrowsOnlyForBadArguments() throws Exception {
        DXNet a = start(1, c -> {}).get(0);
        CompletableFuture<BytesResponse> notInTable = a.sendAsync(new BytesRequest(UNREACHABLE + 1, new byte[8]), 1_000);
        try {
            notInTable.get(2, TimeUnit.SECONDS);
            fail("a request to a node not in the table was answered");
        } catch (ExecutionException expected) {
            assertTrue(String.valueOf(expected.getCause()), expected.getCause() instanceof NetworkException);
        }
        try {
            a.sendAsync(new BytesRequest(1, new byte[8]), 0);
            fail("a timeout of 0 was accepted");
        } catch (IllegalArgumentException expected) {
            // wrong in itself
        }
        a.close();
        CompletableFuture<BytesResponse> closed = a.sendAsync(new BytesRequest(1, new byte[8]), 1_000);
        assertTrue(closed.isCompletedExceptionally());
        assertEquals(0, a.pendingRequests());
    }
}
