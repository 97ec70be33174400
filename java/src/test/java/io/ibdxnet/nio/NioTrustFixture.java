package io.ibdxnet.nio;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.NetworkException;
import io.ibdxnet.Request;
import io.ibdxnet.Response;
import java.io.DataInputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Consumer;
import org.junit.After;

/**
 * What the tests of the NIO trust boundary ({@link NioHelloChecksTest},
 * {@link NioPreSharedKeyTest}: who may open a connection to a node, and that
 * every refusal is counted and leaves the node talking to honest peers)
 * share: nodes on 127.0.0.1 that check blobs and answer echoes, the honest
 * exchange between two of them, key files, raw hellos and the counters.
 * Everything a test opened is closed after it.
 */
public abstract class NioTrustFixture {
    static final byte TYPE = 3;
    static final byte BLOB = 1;
    static final byte ECHO = 2;
    static final byte ECHOED = 3;
    static final String KEY = "a pre-shared key of the cluster, 41 bytes";

    final List<AutoCloseable> open = new ArrayList<>();

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
    DXNet node(int id, Consumer<DXNetConfig> tune) throws Exception {
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

    DXNet node(int id) throws Exception {
        return node(id, c -> {});
    }

    final Map<DXNet, ConcurrentLinkedQueue<Blob>> inboxes = new ConcurrentHashMap<>();

    static void meet(DXNet a, DXNet b) {
        a.addNode(b.nodeId(), "127.0.0.1:" + b.localPort());
        b.addNode(a.nodeId(), "127.0.0.1:" + a.localPort());
    }

    /** Blobs and echoes both ways between {@code a} and {@code b}, every byte checked. */
    void honest(DXNet a, DXNet b) throws Exception {
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

    static long stat(DXNet n, String name) {
        Long v = n.transportStats().get(name);
        assertTrue("no counter " + name + " in " + n.transportStats(), v != null);
        return v;
    }

    static byte[] hello(int flags, int source, int destination, long instance, byte[] nonce) {
        return hello(flags, source, destination, instance, nonce, 1 << 20);
    }

    static byte[] hello(int flags, int source, int destination, long instance, byte[] nonce, long flowUnit) {
        ByteBuffer b = ByteBuffer.allocate(NioWire.HELLO);
        NioWire.putHello(b, flags, source, destination, instance, nonce, flowUnit);
        return b.array();
    }

    /** A raw client from {@code from}: writes {@code bytes}, returns the reply status the node sends. */
    static int rawStatus(String from, int port, byte[] bytes) throws IOException {
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
}
