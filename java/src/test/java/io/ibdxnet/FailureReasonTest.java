package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Every failure a caller sees carries a {@link FailureReason} code can
 * branch on (issue 21), whatever the transport: the same scenario gives the
 * same reason on ib, nio and loopback, sync and async.
 */
public class FailureReasonTest extends EveryTransport {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    private List<DXNet> pair(Consumer<DXNetConfig> tune) throws Exception {
        List<DXNet> n = mesh(2, tune);
        for (DXNet d : n) {
            d.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
            d.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        }
        return n;
    }

    /** The reason {@code call} failed with (it must fail with a NetworkException). */
    private static FailureReason reasonOf(ThrowingCall call) throws Exception {
        try {
            call.run();
        } catch (NetworkException e) {
            assertNotNull(e.reason());
            return e.reason();
        }
        fail("did not fail");
        return null;
    }

    /** The reason {@code f} failed with, within 30 s. */
    private static FailureReason reasonOf(CompletableFuture<?> f) throws Exception {
        try {
            f.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            assertTrue("failed with " + e.getCause(), e.getCause() instanceof NetworkException);
            return ((NetworkException) e.getCause()).reason();
        }
        fail("completed normally");
        return null;
    }

    interface ThrowingCall {
        void run() throws Exception;
    }

    @Test
    public void aClosedNodeSaysClosed() throws Exception {
        List<DXNet> n = pair(c -> { });
        n.get(0).close();
        assertEquals(FailureReason.CLOSED, reasonOf(() -> n.get(0).sendMessage(new BytesMessage(1, new byte[8]))));
        assertEquals(FailureReason.CLOSED, reasonOf(n.get(0).sendAsync(new BytesRequest(1, new byte[8]), 5_000)));
    }

    @Test
    public void aMessageBeyondMaxMessageSizeSaysTooLarge() throws Exception {
        List<DXNet> n = pair(c -> c.maxMessageSize = 1024);
        assertEquals(FailureReason.TOO_LARGE, reasonOf(() -> n.get(0).sendMessage(new BytesMessage(1, new byte[4096]))));
        assertEquals(FailureReason.TOO_LARGE, reasonOf(n.get(0).sendAsync(new BytesRequest(1, new byte[4096]), 5_000)));
    }

    @Test
    public void aThrowingHandlerSaysRemoteHandlerAndANoReceiverSaysNoReceiver() throws Exception {
        List<DXNet> n = pair(c -> { });
        assertEquals(FailureReason.NO_RECEIVER, reasonOf(() -> n.get(0).sendSync(new BytesRequest(1, new byte[1]), 10_000)));
        n.get(1).register(BytesRequest.TYPE, m -> {
            throw new IllegalStateException("handler failed on purpose");
        });
        assertEquals(FailureReason.REMOTE_HANDLER,
                reasonOf(() -> n.get(0).sendSync(new BytesRequest(1, new byte[1]), 10_000)));
        assertEquals(FailureReason.REMOTE_HANDLER, reasonOf(n.get(0).sendAsync(new BytesRequest(1, new byte[1]), 10_000)));
    }

    @Test
    public void noAnswerInTimeSaysTimeout() throws Exception {
        List<DXNet> n = pair(c -> { });
        n.get(1).register(BytesRequest.TYPE, m -> { }); // never answers
        assertEquals(FailureReason.TIMEOUT, reasonOf(() -> n.get(0).sendSync(new BytesRequest(1, new byte[1]), 300)));
        assertEquals(FailureReason.TIMEOUT, reasonOf(n.get(0).sendAsync(new BytesRequest(1, new byte[1]), 300)));
    }

    @Test
    public void anInterruptedRequesterSaysInterrupted() throws Exception {
        List<DXNet> n = pair(c -> { });
        n.get(1).register(BytesRequest.TYPE, m -> { }); // never answers
        AtomicReference<Object> got = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                n.get(0).sendSync(new BytesRequest(1, new byte[1]), 60_000);
                got.set("answered");
            } catch (NetworkException e) {
                got.set(e.reason());
            }
        });
        t.start();
        TestSupport.waitFor("the request is pending", () -> n.get(0).pendingRequests() == 1);
        t.interrupt();
        t.join(10_000);
        assertEquals(FailureReason.INTERRUPTED, got.get());
    }

    /** The destination closes while a request to it waits for its answer. */
    @Test
    public void aDestinationThatGoesAwaySaysDisconnected() throws Exception {
        List<DXNet> n = pair(c -> c.idleTimeoutMs = 2_000);
        java.util.concurrent.CountDownLatch arrived = new java.util.concurrent.CountDownLatch(1);
        n.get(1).register(BytesRequest.TYPE, m -> arrived.countDown()); // never answers
        CompletableFuture<BytesResponse> f = n.get(0).sendAsync(new BytesRequest(1, new byte[1]), 60_000);
        assertTrue("the request arrived", arrived.await(30, TimeUnit.SECONDS));
        n.get(1).close();
        assertEquals(FailureReason.DISCONNECTED, reasonOf(f));
    }

    /** A node in the table where nobody listens: the connection attempt fails. */
    @Test
    public void aNodeWhereNobodyListensSaysUnreachable() throws Exception {
        List<DXNet> n = pair(c -> {
            c.connectTimeoutMs = 500;
            c.sendTimeoutMs = 10_000;
        });
        int port = TestPorts.freePort(); // nobody listens; on ib a UDP port where nobody answers
        n.get(0).addNode(7, "127.0.0.1:" + port);
        assertEquals(FailureReason.UNREACHABLE, reasonOf(() -> n.get(0).sendMessage(new BytesMessage(7, new byte[8]))));
        assertEquals(FailureReason.UNREACHABLE, reasonOf(n.get(0).sendAsync(new BytesRequest(7, new byte[8]), 10_000)));
    }

    /** nio: a peer with another key refuses the handshake. */
    @Test
    public void aPeerWithAnotherKeySaysRefused() throws Exception {
        Assume.assumeTrue("the handshake that refuses is nio's", transport.equals("nio"));
        List<DXNet> n = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            Path key = Files.createTempFile("dxnet-key", ".txt");
            key.toFile().deleteOnExit();
            Files.write(key, ("key-of-node-" + i + "-0123456789abcdef").getBytes(StandardCharsets.UTF_8));
            Files.setPosixFilePermissions(key, PosixFilePermissions.fromString("rw-------"));
            int id = i;
            n.addAll(mesh(1, c -> {
                c.nodeId = id;
                c.authKeyFile = key.toString();
                c.connectTimeoutMs = 5_000;
            }));
        }
        n.get(0).addNode(1, "127.0.0.1:" + n.get(1).localPort());
        n.get(1).addNode(0, "127.0.0.1:" + n.get(0).localPort()); // admitted: the key check is what refuses
        n.get(0).registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        assertEquals(FailureReason.REFUSED, reasonOf(() -> n.get(0).sendMessage(new BytesMessage(1, new byte[8]))));
    }
}
