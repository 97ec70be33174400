package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.List;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The messaging suite's requests, over every transport: responses come back
 * (only from the node asked), an unanswered request times out (sync, and
 * async by {@code requestTimeoutMs}, leaving the pending map empty), a remote
 * handler's exception reaches the requester, and pending requests fail when
 * the peer goes away.
 */
public class DXNetRequestsTest extends DXNetSuite {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    @Test
    public void aResponseFromAnotherNodeThanTheRequestWentToIsRefused() throws Exception {
        List<DXNet> n = start(3);
        java.util.concurrent.CountDownLatch forged = new java.util.concurrent.CountDownLatch(1);
        n.get(1).register(BytesRequest.TYPE, m -> {
            try {
                forged.await(10, java.util.concurrent.TimeUnit.SECONDS); // answers after node 2 tried
                n.get(1).sendMessage(BytesResponse.echo((BytesRequest) m));
            } catch (NetworkException | InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        BytesRequest req = new BytesRequest(1, bytesOf(new long[] {1, 2, 3}));
        java.util.concurrent.CompletableFuture<BytesResponse> f = n.get(0).sendAsync(req);
        // Node 2 guesses the request id (they are sequential) and answers first.
        BytesRequest guess = new BytesRequest(0, new byte[0]);
        ((Message) guess).source = 0; // package-private fields, reached through the io.ibdxnet types
        ((Request<?>) guess).requestId = ((Request<?>) req).requestId;
        BytesResponse fake = BytesResponse.echo(guess);
        fake.bytes = bytesOf(new long[] {666});
        n.get(2).sendMessage(fake);
        waitFor("the forged response refused", () -> n.get(0).transportStats().get("responses_from_wrong_node") == 1);
        assertFalse(f.isDone());
        forged.countDown();
        BytesResponse real = f.get(10, java.util.concurrent.TimeUnit.SECONDS);
        assertArrayEquals(new long[] {1, 2, 3}, longsOf(real.bytes));
    }

    @Test
    public void requestsGetTheirResponses() throws Exception {
        List<DXNet> n = start(2);
        n.get(1).register(BytesRequest.class, req -> n.get(1).reply(req, BytesResponse.echo(req)));
        long t0 = System.nanoTime();
        for (int i = 0; i < 500; i++) {
            long[] v = {i, -i, Long.MAX_VALUE - i};
            BytesResponse r = n.get(0).sendSync(new BytesRequest(1, bytesOf(v)), 10_000);
            assertArrayEquals(v, longsOf(r.bytes));
            assertEquals(1, r.getSource());
        }
        System.err.println(transport + ": 500 requests: " + (System.nanoTime() - t0) / 500 / 1000 + " us per round trip");
    }

    @Test
    public void unansweredRequestTimesOut() throws Exception {
        List<DXNet> n = start(2);
        n.get(1).register(BytesRequest.TYPE, m -> {});
        long t0 = System.nanoTime();
        try {
            n.get(0).sendSync(new BytesRequest(1, bytesOf(new long[] {1})), 300);
            fail("no response expected");
        } catch (RequestTimeoutException expected) {
            assertTrue(System.nanoTime() - t0 >= 300_000_000L);
        }
    }

    @Test
    public void requestTimeoutMsEndsAsyncRequestsAndEmptiesThePendingMap() throws Exception {
        List<DXNet> n = start(2, "100", c -> c.requestTimeoutMs = 300);
        n.get(1).register(BytesRequest.TYPE, m -> {});
        long t0 = System.nanoTime();
        java.util.concurrent.CompletableFuture<BytesResponse> f = n.get(0).sendAsync(new BytesRequest(1, bytesOf(new long[] {1})));
        // A caller that gives up first leaves nothing behind either.
        java.util.concurrent.CompletableFuture<BytesResponse> abandoned = n.get(0).sendAsync(new BytesRequest(1, bytesOf(new long[] {2})));
        try {
            abandoned.get(20, java.util.concurrent.TimeUnit.MILLISECONDS);
            fail("no response expected");
        } catch (java.util.concurrent.TimeoutException expected) {
            // the caller stops waiting
        }
        assertEquals(2, n.get(0).pendingRequests());
        try {
            f.get(10, java.util.concurrent.TimeUnit.SECONDS);
            fail("no response expected");
        } catch (java.util.concurrent.ExecutionException expected) {
            assertTrue(String.valueOf(expected.getCause()), expected.getCause() instanceof RequestTimeoutException);
            assertTrue(expected.getCause().getMessage(), expected.getCause().getMessage().contains("within 300 ms"));
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertTrue("timed out after " + ms + " ms", ms >= 300 && ms < 5_000);
        waitFor("the pending map empty", () -> n.get(0).pendingRequests() == 0);
        // Its entry leaves the map just before its future fails (another thread): wait for both.
        waitFor("the abandoned request failed", abandoned::isCompletedExceptionally);
    }

    @Test
    public void aRemoteHandlerExceptionReachesTheRequester() throws Exception {
        List<DXNet> n = start(2);
        n.get(1).register(BytesRequest.class, req -> {
            throw new IllegalStateException("no such key: " + longsOf(req.bytes)[0]);
        });
        long[] ms = new long[5];
        for (int i = 0; i < ms.length; i++) {
            long t0 = System.nanoTime();
            try {
                n.get(0).sendSync(new BytesRequest(1, bytesOf(new long[] {42 + i})), 10_000);
                fail("the handler throws");
            } catch (RemoteHandlerException e) {
                ms[i] = (System.nanoTime() - t0) / 1_000_000;
                assertEquals(1, e.node());
                assertEquals(IllegalStateException.class.getName(), e.remoteClass());
                assertTrue(e.getMessage(), e.getMessage().contains("no such key: " + (42 + i)));
            }
        }
        java.util.Arrays.sort(ms);
        assertTrue("median " + ms[2] + " ms", ms[2] < 100);
        assertEquals(0, n.get(0).pendingRequests());
        assertEquals(5L, (long) n.get(1).transportStats().get("handler_errors"));
    }

    @Test
    public void pendingRequestsFailWhenThePeerGoesAway() throws Exception {
        List<DXNet> n = start(2);
        n.get(1).register(BytesRequest.TYPE, m -> {});
        java.util.concurrent.CompletableFuture<BytesResponse> f = n.get(0).sendAsync(new BytesRequest(1, bytesOf(new long[] {1})));
        n.get(1).close();
        try {
            f.get(30, java.util.concurrent.TimeUnit.SECONDS);
            fail("the request cannot succeed");
        } catch (java.util.concurrent.ExecutionException expected) {
            assertTrue(expected.getCause().getMessage(), expected.getCause() instanceof NetworkException);
        }
    }
}
