package io.ibdxnet;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.List;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;

/**
 * A request nobody at its destination handles, and a response of a type the
 * requester never registered, end at once instead of in the request's
 * timeout (issue 21): the destination answers "no receiver", and the
 * requester learns the response class from {@code Request<R>}.
 */
@RunWith(Parameterized.class)
public class NoReceiverTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return new Object[] {"loopback", "nio", "ib"};
    }

    @Parameterized.Parameter
    public String transport;

    private static final int TIMEOUT_MS = 10_000;
    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    private List<DXNet> pair() throws Exception {
        return TestSupport.mesh(transport, 2, c -> c.requestTimeoutMs = TIMEOUT_MS, nodes);
    }

    /** Sends a request that must fail with a {@link NoReceiverException} well within its timeout; returns its message. */
    private static String refused(DXNet from) throws Exception {
        long t0 = System.nanoTime();
        try {
            from.sendSync(new BytesRequest(1, new byte[] {1, 2, 3}), TIMEOUT_MS);
            fail("answered");
        } catch (NoReceiverException e) {
            assertEquals(FailureReason.NO_RECEIVER, e.reason());
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue("refused after " + ms + " ms", ms < 2_000);
            return e.getMessage();
        }
        return null;
    }

    @Test
    public void aRequestOfATypeTheDestinationNeverRegisteredIsRefusedAtOnce() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        String why = refused(n.get(0));
        assertTrue(why, why.contains("not registered at node 1") && why.contains(BytesRequest.TYPE.type() + "/"));
    }

    @Test
    public void aRequestWhoseTypeHasNoHandlerIsRefusedAtOnce() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.get(1).registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        String why = refused(n.get(0));
        assertTrue(why, why.contains("no receiver"));
        // The node still answers what it handles.
        n.get(1).register(BytesRequest.TYPE, m -> n.get(1).reply((BytesRequest) m, BytesResponse.echo((BytesRequest) m)));
        BytesResponse r = n.get(0).sendSync(new BytesRequest(1, new byte[] {7}), TIMEOUT_MS);
        assertArrayEquals(new byte[] {7}, r.bytes);
    }

    @Test
    public void theResponseClassIsLearnedFromTheRequest() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType(BytesRequest.TYPE, BytesRequest.class); // BytesResponse is never registered at node 0
        n.get(1).registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.get(1).register(BytesRequest.TYPE, m -> n.get(1).reply((BytesRequest) m, BytesResponse.echo((BytesRequest) m)));
        for (int i = 0; i < 3; i++) {
            long t0 = System.nanoTime();
            BytesResponse r = n.get(0).sendSync(new BytesRequest(1, new byte[] {(byte) i, 9}), TIMEOUT_MS);
            assertArrayEquals(new byte[] {(byte) i, 9}, r.bytes);
            assertTrue((System.nanoTime() - t0) / 1_000_000 < 2_000);
        }
    }

    /** A request that does not declare its response class, answered with an unregistered type: fails at once, naming it. */
    @Test
    @SuppressWarnings("unchecked")
    public void anUndeclaredUnregisteredResponseFailsAtOnce() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType(RawRequest.TYPE, RawRequest.class);
        n.get(1).registerMessageType(RawRequest.TYPE, RawRequest.class);
        n.get(1).register(RawRequest.TYPE, m -> n.get(1).reply((RawRequest) m, BytesResponse.echo(new BytesRequest())));
        long t0 = System.nanoTime();
        try {
            n.get(0).sendSync(new RawRequest(1), TIMEOUT_MS);
            fail("answered");
        } catch (NetworkException e) {
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(e.getMessage(), !(e instanceof RequestTimeoutException) && ms < 2_000
                    && e.getMessage().contains(BytesResponse.TYPE.type() + "/" + BytesResponse.TYPE.subtype()));
            assertEquals(FailureReason.BAD_RESPONSE, e.reason());
        }
    }

    /** A raw request: its response class is left open. */
    @SuppressWarnings("rawtypes")
    public static final class RawRequest extends Request {
        static final MessageType TYPE = MessageType.of(62, 1);

        public RawRequest() {
            super(TYPE);
        }

        RawRequest(int dest) {
            super(dest, TYPE);
        }

        @Override
        protected void exportPayload(MessageExporter out) {}

        @Override
        protected int payloadSize() {
            return 0;
        }

        @Override
        protected void importPayload(MessageImporter in) {}
    }
}
