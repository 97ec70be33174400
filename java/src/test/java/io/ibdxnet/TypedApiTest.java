package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import io.ibdxnet.internal.ResponseTypes;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The typed API on loopback: typed handlers and responses, reply, MessageType, readBytes. */
public class TypedApiTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    static final MessageType OTHER = MessageType.of(7, 20);
    static final MessageType BIG = MessageType.of(7, 21);
    static final MessageType GENERIC_ASK = MessageType.of(7, 22);

    /** A response of a class the request did not declare. */
    public static final class OtherResponse extends Response {
        public OtherResponse() {
            super(OTHER);
        }

        OtherResponse(Request<?> r) {
            super(r, OTHER);
        }

        @Override
        protected void exportPayload(MessageExporter out) {}

        @Override
        protected void importPayload(MessageImporter in) {}
    }

    /** A request class that leaves its response open; a subclass binds it. */
    public abstract static class Ask<R extends Response> extends Request<R> {
        protected Ask(int dest, MessageType t) {
            super(dest, t);
        }

        protected Ask(MessageType t) {
            super(t);
        }

        @Override
        protected void exportPayload(MessageExporter out) {}

        @Override
        protected void importPayload(MessageImporter in) {}
    }

    /** Binds {@code R} through {@link Ask}. */
    public static final class EchoAsk extends Ask<BytesResponse> {
        public EchoAsk() {
            super(GENERIC_ASK);
        }

        EchoAsk(int dest) {
            super(dest, GENERIC_ASK);
        }
    }

    /** Binds {@code R} directly; {@link SubEcho} inherits it. */
    public static class PlainEcho extends Request<BytesResponse> {
        public PlainEcho() {
            super(GENERIC_ASK);
        }

        @Override
        protected void exportPayload(MessageExporter out) {}

        @Override
        protected void importPayload(MessageImporter in) {}
    }

    /** A subclass that is not generic itself: R stays BytesResponse. */
    public static final class SubEcho extends PlainEcho {}

    /** A request declared without its response type (as before the typed API). */
    @SuppressWarnings("rawtypes")
    public static final class RawAsk extends Request {
        public RawAsk() {
            super(GENERIC_ASK);
        }

        @Override
        protected void exportPayload(MessageExporter out) {}

        @Override
        protected void importPayload(MessageImporter in) {}
    }

    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    private List<DXNet> start(int maxMessageSize) throws Exception {
        for (int i = 0; i < 2; i++) {
            DXNetConfig c = new DXNetConfig(i);
            c.transport = "loopback";
            c.listen = "127.0.0.1:0";
            c.maxMessageSize = maxMessageSize;
            c.maxUnfinishedBytesPerConnection = Math.max(c.maxUnfinishedBytesPerConnection, maxMessageSize);
            DXNet n = DXNet.start(c);
            n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
            n.registerMessageType(OTHER, OtherResponse.class);
            nodes.add(n);
        }
        nodes.get(0).addNode(1, "127.0.0.1:" + nodes.get(1).localPort());
        nodes.get(1).addNode(0, "127.0.0.1:" + nodes.get(0).localPort());
        return nodes;
    }

    @Test
    public void aResponseOfAnotherClassFailsTheRequestNamingBothClasses() throws Exception {
        List<DXNet> n = start(64 << 20);
        n.get(1).register(BytesRequest.class, req -> n.get(1).sendMessage(new OtherResponse(req)));
        CompletableFuture<BytesResponse> f = n.get(0).sendAsync(new BytesRequest(1, bytesOf(new long[] {1})));
        try {
            f.get(10, TimeUnit.SECONDS);
            fail("completed with the wrong class");
        } catch (ExecutionException expected) {
            String msg = expected.getCause().getMessage();
            assertTrue(String.valueOf(expected.getCause()), expected.getCause() instanceof NetworkException);
            assertTrue(msg, msg.contains("OtherResponse") && msg.contains("BytesResponse") && msg.contains("node 1"));
        }
        assertEquals(0, n.get(0).pendingRequests());
    }

    @Test
    public void theResponseClassIsFoundThroughAGenericSuperclass() throws Exception {
        assertEquals(BytesResponse.class, ResponseTypes.expected(new EchoAsk()));
        assertEquals(BytesResponse.class, ResponseTypes.expected(new SubEcho()));
        assertEquals("raw: nothing to check", Response.class, ResponseTypes.expected(new RawAsk()));
        List<DXNet> n = start(64 << 20);
        n.get(1).register(EchoAsk.class, ask -> n.get(1).reply(ask, BytesResponse.echo(new BytesRequest(0, bytesOf(new long[] {5})))));
        BytesResponse r = n.get(0).sendSync(new EchoAsk(1));
        assertArrayEquals(new long[] {5}, longsOf(r.bytes));
    }

    @Test
    public void aReplyTooLargeToSendReachesTheRequesterAsARemoteError() throws Exception {
        List<DXNet> n = start(4096);
        n.get(1).register(BytesRequest.class, req -> {
            BytesResponse big = BytesResponse.echo(req);
            big.bytes = bytesOf(new long[4096]); // 32 KiB > maxMessageSize
            n.get(1).reply(req, big);
        });
        long t0 = System.nanoTime();
        try {
            n.get(0).sendSync(new BytesRequest(1, bytesOf(new long[] {1})), 10_000);
            fail("an unsendable reply succeeded");
        } catch (RemoteHandlerException expected) {
            assertEquals(NetworkException.class.getName(), expected.remoteClass()); // reason TOO_LARGE there
            assertTrue(expected.getMessage(), expected.getMessage().contains("maxMessageSize"));
        }
        assertTrue("took the whole timeout", System.nanoTime() - t0 < 5_000_000_000L);
        assertEquals(1L, (long) n.get(1).transportStats().get("replies_failed"));
    }

    @Test
    public void registeringAClassWithoutANoArgumentConstructorNamesIt() throws Exception {
        List<DXNet> n = start(64 << 20);
        try {
            n.get(0).register(BigWithoutDefault.class, m -> {});
            fail("accepted");
        } catch (IllegalArgumentException expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("BigWithoutDefault"));
        }
    }

    /** Has no no-argument constructor. */
    public static final class BigWithoutDefault extends Message {
        BigWithoutDefault(int dest) {
            super(dest, BIG);
        }

        @Override
        protected void exportPayload(MessageExporter out) {}

        @Override
        protected void importPayload(MessageImporter in) {}
    }

    @Test
    public void messageTypesAreCheckedAndCompareByValue() {
        assertEquals(MessageType.of(7, 255), MessageType.of(7, 255));
        assertEquals("7/255", MessageType.of(7, 255).toString());
        assertEquals((byte) 255, MessageType.of(7, 255).subtype());
        for (int[] bad : new int[][] {{-1, 0}, {0, 256}, {300, 1}}) {
            try {
                MessageType.of(bad[0], bad[1]);
                fail("accepted " + bad[0] + "/" + bad[1]);
            } catch (IllegalArgumentException expected) {
                assertTrue(expected.getMessage().contains(bad[0] + "/" + bad[1]));
            }
        }
        assertEquals(MessageType.of(7, 22), new EchoAsk().getMessageType());
    }

    @Test
    public void readBytesReadsWhatWriteBytesWrote() {
        MessageExporter out = new MessageExporter(16);
        byte[] raw = {9, 8, 7, 6, 5};
        out.writeBytes(raw, 1, 3);
        out.writeInt(42);
        byte[] p = java.util.Arrays.copyOf(out.array(), out.size());
        MessageImporter in = new MessageImporter(p, p.length);
        byte[] into = new byte[5];
        in.readBytes(into, 2, 3);
        assertArrayEquals(new byte[] {0, 0, 8, 7, 6}, into);
        assertEquals(42, in.readInt());
        in = new MessageImporter(p, p.length);
        assertArrayEquals(new byte[] {8, 7}, in.readBytes(2));
        try {
            in.readBytes(new byte[2], 1, 2);
            fail("wrote past the array");
        } catch (IndexOutOfBoundsException expected) {
            assertEquals("nothing read", 5, in.remaining());
        }
        try {
            in.readBytes(6);
            fail("read past the payload");
        } catch (IllegalStateException expected) {
            assertEquals(5, in.remaining());
        }
    }
}
