package io.ibdxnet.nio;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.NetworkException;
import io.ibdxnet.Request;
import io.ibdxnet.Response;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Consumer;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The NIO trust boundary: who may open a connection to a node (the address
 * check, the pre-shared key's challenge–response, replays, silent clients),
 * and that every refusal is counted and leaves the node talking to honest peers.
 */
public class NioTrustTest {
    static final byte TYPE = 3;
    static final byte BLOB = 1;
    static final byte ECHO = 2;
    static final byte ECHOED = 3;
    static final String KEY = "a pre-shared key of the cluster, 41 bytes";

    @Rule
    public final Timeout timeout = Timeout.seconds(60);

    private final List<AutoCloseable> open = new ArrayList<>();

    @After
    public void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    /** A message whose payload is derived from its sequence number (checked on receipt). */
    public static final class Blob extends Message {
        int seq;
        byte[] payload;

        public Blob() {
            super(TYPE, BLOB);
        }

        Blob(int dest, int seq) {
            super(dest, TYPE, BLOB);
            this.seq = seq;
            this.payload = expected(seq);
        }

        static byte[] expected(int seq) {
            byte[] b = new byte[100 + seq * 37 % 3000];
            for (int i = 0; i < b.length; i++) {
                b[i] = (byte) (seq * 13 + i);
            }
            return b;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeInt(seq);
            out.writeByteArray(payload);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            seq = in.readInt();
            payload = in.readByteArray();
        }
    }

    public static final class Echo extends Request<Echoed> {
        long value;

        public Echo() {
            super(TYPE, ECHO);
        }

        Echo(int dest, long value) {
            super(dest, TYPE, ECHO);
            this.value = value;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeLong(value);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            value = in.readLong();
        }
    }

    public static final class Echoed extends Response {
        long value;

        public Echoed() {
            super(TYPE, ECHOED);
        }

        Echoed(Echo e) {
            super(e, TYPE, ECHOED);
            this.value = ~e.value;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeLong(value);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            value = in.readLong();
        }
    }

    /** A node on 127.0.0.1 that checks blobs and answers echoes. */
    private DXNet node(int id, Consumer<DXNetConfig> tune) throws Exception {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = "nio";
        c.listen = "127.0.0.1:0";
        c.connectTimeoutMs = 2_000;
        c.handlerThreads = 1; // in-order delivery, checked
        tune.accept(c);
        DXNet n = DXNet.start(c);
        open.add(n);
        n.registerMessageType(TYPE, BLOB, Blob.class);
        n.registerMessageType(TYPE, ECHO, Echo.class);
        n.registerMessageType(TYPE, ECHOED, Echoed.class);
        ConcurrentLinkedQueue<Blob> got = new ConcurrentLinkedQueue<>();
        inboxes.put(n, got);
        n.register(TYPE, BLOB, m -> got.add((Blob) m));
        n.register(TYPE, ECHO, m -> {
            try {
                n.sendMessage(new Echoed((Echo) m));
            } catch (NetworkException e) {
                throw new IllegalStateException(e);
            }
        });
        return n;
    }

    private DXNet node(int id) throws Exception {
        return node(id, c -> {});
    }

    private DXNet keyed(int id, Path keyFile) throws Exception {
        return node(id, c -> c.authKeyFile = keyFile.toString());
    }

    private final Map<DXNet, ConcurrentLinkedQueue<Blob>> inboxes = new ConcurrentHashMap<>();

    private static void meet(DXNet a, DXNet b) {
        a.addNode(b.nodeId(), "127.0.0.1:" + b.localPort());
        b.addNode(a.nodeId(), "127.0.0.1:" + a.localPort());
    }

    /** Blobs and echoes both ways between {@code a} and {@code b}, every byte checked. */
    private void honest(DXNet a, DXNet b) throws Exception {
        for (DXNet[] p : new DXNet[][] {{a, b}, {b, a}}) {
            ConcurrentLinkedQueue<Blob> in = inboxes.get(p[1]);
            in.clear();
            for (int s = 0; s < 50; s++) {
                p[0].sendMessage(new Blob(p[1].nodeId(), s));
            }
            for (int s = 0; s < 5; s++) {
                Echoed r = p[0].sendSync(new Echo(p[1].nodeId(), s * 1_000_003L), 10_000);
                assertEquals(~(s * 1_000_003L), r.value);
            }
            waitFor("in.size() == 50", 30_000, () -> in.size() == 50);
            int s = 0;
            for (Blob m : in) {
                assertEquals(s, m.seq);
                assertArrayEquals("blob " + s, Blob.expected(s), m.payload);
                s++;
            }
        }
    }

    static Path keyFile(String key) throws IOException {
        Path f = Files.createTempFile("dxnet-key", ".txt");
        f.toFile().deleteOnExit();
        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-------"));
        Files.write(f, (key + "\n").getBytes(StandardCharsets.UTF_8));
        return f;
    }

    private static long stat(DXNet n, String name) {
        Long v = n.transportStats().get(name);
        assertTrue("no counter " + name + " in " + n.transportStats(), v != null);
        return v;
    }

    private static byte[] hello(int flags, int source, int destination, long instance, byte[] nonce) {
        return hello(flags, source, destination, instance, nonce, 1 << 20);
    }

    private static byte[] hello(int flags, int source, int destination, long instance, byte[] nonce, long flowUnit) {
        ByteBuffer b = ByteBuffer.allocate(NioWire.HELLO);
        NioWire.putHello(b, flags, source, destination, instance, nonce, flowUnit);
        return b.array();
    }

    /** A raw client from {@code from}: writes {@code bytes}, returns the reply status the node sends. */
    private static int rawStatus(String from, int port, byte[] bytes) throws IOException {
        try (Socket s = new Socket()) {
            s.bind(new InetSocketAddress(from, 0));
            s.connect(new InetSocketAddress("127.0.0.1", port));
            s.setSoTimeout(5_000);
            s.getOutputStream().write(bytes);
            DataInputStream in = new DataInputStream(s.getInputStream());
            assertEquals(NioWire.MAGIC, in.readInt());
            int status = in.readShort() & 0xFFFF;
            in.readShort();
            if (status != NioWire.REPLY_OK && status != NioWire.REPLY_CHALLENGE) {
                assertEquals("the node must close a refused connection", -1, in.read());
            }
            return status;
        }
    }

    private static NetworkException sendFails(DXNet from, int to) {
        try {
            from.sendMessage(new Blob(to, 0));
            fail("sent to node " + to);
            return null;
        } catch (NetworkException e) {
            return e;
        }
    }

    private static void assertMentions(Throwable e, String... parts) {
        for (String p : parts) {
            assertTrue("'" + p + "' missing in: " + e.getMessage(), e.getMessage().contains(p));
        }
        assertTrue("the key leaked into: " + e.getMessage(), !e.getMessage().contains(KEY));
    }

    // ---- the address check ----

    @Test
    public void helloFromAnAddressTheTableDoesNotGiveIsRefusedAndCounted() throws Exception {
        DXNet a = node(0);
        DXNet b = node(1);
        meet(a, b);
        // No node of the table is at 127.0.0.2: reset at accept, before any hello is read.
        NioAdmissionTest.assertResetAtAccept("127.0.0.2", b.localPort());
        assertEquals(1, stat(b, "accepts_refused_unknown_address"));
        // From node 0's address, a hello claiming a node the table puts elsewhere is refused at the hello.
        b.addNode(2, "127.0.0.3:1");
        assertEquals(NioWire.Refusal.ADDRESS.status, rawStatus("127.0.0.1", b.localPort(), hello(0, 2, 1, 7, new byte[16])));
        assertEquals(1, stat(b, "hellos_refused_address"));
        // A wildcard table entry says where to connect to, not who may connect: no address at all.
        b.addNode(5, "0.0.0.0:1");
        assertEquals(NioWire.Refusal.ADDRESS.status, rawStatus("127.0.0.1", b.localPort(), hello(0, 5, 1, 7, new byte[16])));
        assertEquals(2, stat(b, "hellos_refused_address"));
        NioAdmissionTest.assertResetAtAccept("127.0.0.4", b.localPort());
        assertEquals(2, stat(b, "accepts_refused_unknown_address"));
        assertEquals(4, stat(b, "rejected"));
        honest(a, b);
        // The claimed node's real connection was never displaced: no failure on either side.
        assertEquals(0, stat(a, "failures"));
    }

    @Test
    public void theAddressCheckCanBeSwitchedOff() throws Exception {
        DXNet b = node(1, c -> c.checkPeerAddress = false);
        b.addNode(0, "127.0.0.1:1");
        assertEquals(NioWire.REPLY_OK, rawStatus("127.0.0.2", b.localPort(), hello(0, 0, 1, 7, new byte[16])));
        assertEquals(0, stat(b, "rejected"));
    }

    /**
     * The connector's flow-control unit is a trust boundary: one we would confirm
     * every few bytes in, or that could overflow our counts, is refused and counted;
     * the honest connection is undisturbed.
     */
    @Test
    public void helloWithAFlowUnitOutOfRangeIsRefusedAndCounted() throws Exception {
        DXNet a = node(0);
        DXNet b = node(1);
        meet(a, b);
        long[] bad = {0, 1, io.ibdxnet.transport.Confirmations.MIN_UNIT - 1, io.ibdxnet.transport.Confirmations.MAX_UNIT + 1,
            Long.MAX_VALUE, -1};
        for (long u : bad) {
            assertEquals("unit " + u, NioWire.Refusal.FLOW_UNIT.status,
                    rawStatus("127.0.0.1", b.localPort(), hello(0, 0, 1, 7, new byte[16], u)));
        }
        assertEquals(bad.length, stat(b, "hellos_refused_flow_unit"));
        assertEquals(bad.length, stat(b, "rejected"));
        honest(a, b);
        assertEquals(0, stat(a, "failures"));
    }

    @Test
    public void unknownNodeIsCountedByReason() throws Exception {
        DXNet b = node(1);
        b.addNode(0, "127.0.0.1:1"); // a known address (else the connection is refused at accept)
        assertEquals(NioWire.Refusal.UNKNOWN_NODE.status, rawStatus("127.0.0.1", b.localPort(), hello(0, 9, 1, 7, new byte[16])));
        assertEquals(1, stat(b, "hellos_refused_unknown_node"));
    }

    // ---- the pre-shared key ----

    @Test
    public void keyedNodesExchangeMessagesAndRequests() throws Exception {
        Path key = keyFile(KEY);
        DXNet a = keyed(0, key);
        DXNet b = keyed(1, key);
        meet(a, b);
        honest(a, b);
        assertEquals(0, stat(a, "rejected") + stat(b, "rejected"));
        assertEquals(0, stat(a, "failures") + stat(b, "failures"));
    }

    @Test
    public void keyedAndUnkeyedNodesRefuseEachOtherNamingTheNodeAndTheReason() throws Exception {
        Path key = keyFile(KEY);
        DXNet plain = node(0);
        DXNet keyed = keyed(1, key);
        meet(plain, keyed);
        NetworkException refused = sendFails(plain, 1);
        assertMentions(refused, "node 1", "requires a pre-shared key and we have none");
        assertEquals(NioFailure.HANDSHAKE, NioFailureTest.kindOf(refused)); // a reply that refuses, not a closed port
        assertEquals(io.ibdxnet.FailureReason.REFUSED, refused.reason());
        assertEquals(1, stat(keyed, "hellos_refused_unauthenticated"));
        assertMentions(sendFails(keyed, 0), "node 0", "has no pre-shared key and we use one");
        assertEquals(1, stat(plain, "hellos_refused_unexpected_key"));
        // Both still talk to their own kind.
        DXNet keyed2 = keyed(2, key);
        meet(keyed, keyed2);
        honest(keyed, keyed2);
        DXNet plain3 = node(3);
        meet(plain, plain3);
        honest(plain, plain3);
    }

    @Test
    public void aWrongKeyIsRefusedOnBothSides() throws Exception {
        DXNet a = keyed(0, keyFile("another key, also long enough"));
        DXNet b = keyed(1, keyFile(KEY));
        meet(a, b);
        NetworkException wrong = sendFails(a, 1);
        assertMentions(wrong, "node 1", "could not prove the pre-shared key");
        assertEquals(NioFailure.HANDSHAKE, NioFailureTest.kindOf(wrong));
        waitFor("stat(b, \"hellos_refused_unauthenticated\") == 1", 30_000, () -> stat(b, "hellos_refused_unauthenticated") == 1);
        assertEquals(1, stat(a, "handshakes_peer_unauthenticated"));
        DXNet c = keyed(2, keyFile(KEY));
        meet(b, c);
        honest(b, c);
    }

    @Test
    public void aKeyedNodeRefusesAnAcceptorThatDoesNotProveTheKey() throws Exception {
        DXNet a = keyed(0, keyFile(KEY));
        // An impostor at node 1's address: reads the hello, says OK without a challenge.
        ServerSocket impostor = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"));
        open.add(impostor);
        Thread t = new Thread(() -> {
            try (Socket s = impostor.accept()) {
                new DataInputStream(s.getInputStream()).readFully(new byte[NioWire.HELLO]);
                ByteBuffer ok = ByteBuffer.allocate(NioWire.REPLY);
                NioWire.putReply(ok, NioWire.REPLY_OK, 1);
                s.getOutputStream().write(ok.array());
                s.getInputStream().read();
            } catch (IOException e) {
                // the node closed
            }
        }, "impostor");
        t.setDaemon(true);
        t.start();
        a.addNode(1, "127.0.0.1:" + impostor.getLocalPort());
        NetworkException unproven = sendFails(a, 1);
        assertMentions(unproven, "node 1", "without proving the pre-shared key");
        assertEquals(NioFailure.HANDSHAKE, NioFailureTest.kindOf(unproven));
        assertEquals(1, stat(a, "handshakes_peer_unauthenticated"));
    }

    @Test
    public void aRawHelloWithoutTheKeyIsRefusedAtTheRightAddress() throws Exception {
        DXNet a = keyed(0, keyFile(KEY));
        DXNet b = keyed(1, keyFile(KEY));
        meet(a, b);
        assertEquals(NioWire.Refusal.KEY_REQUIRED.status, rawStatus("127.0.0.1", b.localPort(), hello(0, 0, 1, 7, new byte[16])));
        // Claims the key, but cannot prove it.
        byte[] nonce = new byte[16];
        nonce[0] = 1;
        byte[] bytes = Arrays.copyOf(hello(NioWire.HELLO_KEYED, 0, 1, 7, nonce), NioWire.HELLO + NioWire.PROOF);
        assertEquals(NioWire.Refusal.WRONG_PROOF.status, finalStatus(b.localPort(), bytes));
        assertEquals(2, stat(b, "hellos_refused_unauthenticated"));
        honest(a, b);
    }

    /**
     * Writes a keyed hello, and after the challenge the given proof whatever
     * the challenge says; returns the status that ends the handshake.
     */
    private static int finalStatus(int port, byte[] helloAndProof) throws IOException {
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setSoTimeout(5_000);
            s.getOutputStream().write(helloAndProof, 0, NioWire.HELLO);
            DataInputStream in = new DataInputStream(s.getInputStream());
            assertEquals(NioWire.MAGIC, in.readInt());
            int status = in.readShort() & 0xFFFF;
            in.readShort();
            if (status != NioWire.REPLY_CHALLENGE) {
                assertEquals("the node must close a refused connection", -1, in.read());
                return status;
            }
            in.readFully(new byte[NioWire.CHALLENGE]);
            s.getOutputStream().write(helloAndProof, NioWire.HELLO, NioWire.PROOF);
            assertEquals(NioWire.MAGIC, in.readInt());
            status = in.readShort() & 0xFFFF;
            in.readShort();
            assertEquals("the node must close a refused connection", -1, in.read());
            return status;
        }
    }

    @Test
    public void aRecordedHandshakeReplayedByteForByteIsRefused() throws Exception {
        Path key = keyFile(KEY);
        DXNet a = keyed(0, key);
        DXNet b = keyed(1, key);
        // Node 0 reaches node 1 through a recording relay on 127.0.0.1 (the address node 1 expects for node 0).
        Relay relay = new Relay(b.localPort());
        a.addNode(1, "127.0.0.1:" + relay.port());
        b.addNode(0, "127.0.0.1:" + a.localPort());
        honest(a, b);
        byte[] recorded = Arrays.copyOf(relay.recorded(), NioWire.HELLO + NioWire.PROOF);

        assertEquals(NioWire.Refusal.REPLAYED.status, finalStatus(b.localPort(), recorded));
        assertEquals(1, stat(b, "hellos_refused_replayed"));
        // The same with a fresh nonce (as if the acceptor had forgotten the old one): the old proof fails.
        recorded[24] ^= 1;
        assertEquals(NioWire.Refusal.WRONG_PROOF.status, finalStatus(b.localPort(), recorded));
        assertEquals(1, stat(b, "hellos_refused_unauthenticated"));
        // Node 0's real connection was not displaced by the replays.
        assertEquals(0, stat(b, "failures"));
        honest(a, b);
    }

    // ---- clients that say nothing ----

    @Test
    public void aSilentOrSlowClientIsClosedAtTheHandshakeTimeout() throws Exception {
        DXNet a = node(0);
        DXNet b = node(1, c -> c.connectTimeoutMs = 300);
        meet(a, b);
        for (byte[] said : new byte[][] {{}, Arrays.copyOf(hello(0, 0, 1, 7, new byte[16]), 20)}) {
            try (Socket s = new Socket("127.0.0.1", b.localPort())) {
                s.setSoTimeout(5_000);
                s.getOutputStream().write(said);
                long t0 = System.nanoTime();
                assertEquals(-1, s.getInputStream().read());
                long ms = (System.nanoTime() - t0) / 1_000_000;
                assertTrue("closed after " + ms + " ms", ms < 2_000);
            }
        }
        assertEquals(2, stat(b, "hellos_refused_timeout"));
        honest(a, b);
    }

    /** Relays one connection to {@code target}, recording what the connector sent. */
    private final class Relay {
        private final ServerSocket server = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"));
        private final ByteArrayOutputStream toTarget = new ByteArrayOutputStream();

        Relay(int target) throws IOException {
            open.add(server);
            Thread t = new Thread(() -> {
                try (Socket in = server.accept(); Socket out = new Socket("127.0.0.1", target)) {
                    Thread back = pump(out.getInputStream(), in.getOutputStream(), null);
                    pump(in.getInputStream(), out.getOutputStream(), toTarget).join();
                    back.join();
                } catch (IOException | InterruptedException e) {
                    // the test is over
                }
            }, "relay");
            t.setDaemon(true);
            t.start();
        }

        int port() {
            return server.getLocalPort();
        }

        byte[] recorded() {
            synchronized (toTarget) {
                return toTarget.toByteArray();
            }
        }

        private Thread pump(InputStream from, OutputStream to, ByteArrayOutputStream record) {
            Thread t = new Thread(() -> {
                byte[] buf = new byte[65536];
                try {
                    int n;
                    while ((n = from.read(buf)) > 0) {
                        if (record != null) {
                            synchronized (record) {
                                record.write(buf, 0, n);
                            }
                        }
                        to.write(buf, 0, n);
                    }
                } catch (IOException e) {
                    // one side closed
                }
            }, "relay-pump");
            t.setDaemon(true);
            t.start();
            return t;
        }
    }
}
