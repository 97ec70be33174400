package io.ibdxnet.nio;

import static io.ibdxnet.TestSupport.assertHoldsFor;
import static io.ibdxnet.TestSupport.awaitNodeThreadsGone;
import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.Message;
import io.ibdxnet.NetworkException;
import io.ibdxnet.Response;
import io.ibdxnet.TestSupport;
import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import io.ibdxnet.app.DemoMain;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The NIO transport's failure cases: refused, reset, half-open, garbage, unknown nodes, leaks. */
public class NioFailureTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    static final byte TYPE = 1;

    private final List<AutoCloseable> open = new ArrayList<>();

    @After
    public void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    private DXNet node(int id) throws Exception {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = "nio";
        c.listen = "127.0.0.1:0";
        c.keepAliveMs = 100;
        c.idleTimeoutMs = 600;
        c.connectTimeoutMs = 2_000;
        c.sendTimeoutMs = 5_000;
        DXNet n = DXNet.start(c);
        // The demo's message types: the same node can talk to a demo process.
        n.registerMessageType(TYPE, (byte) 1, BytesMessage.class);
        n.registerMessageType(TYPE, (byte) 2, BytesRequest.class);
        n.registerMessageType(TYPE, (byte) 3, BytesResponse.class);
        open.add(n);
        return n;
    }

    private static int freePort() throws IOException {
        return io.ibdxnet.TestPorts.freePort();
    }

    /** A fake peer: accepts one connection and hands it to {@code script}. */
    private ServerSocket fakePeer(SocketScript script) throws IOException {
        ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        open.add(server);
        Thread t = new Thread(() -> {
            try (Socket s = server.accept()) {
                script.run(s);
            } catch (IOException e) {
                // the node closed its side: the script is over
            }
        }, "fake-peer");
        t.setDaemon(true);
        t.start();
        return server;
    }

    interface SocketScript {
        void run(Socket s) throws IOException;
    }

    /** Reads the node's hello and answers OK as node {@code self}. */
    private static void handshake(Socket s, int self) throws IOException {
        DataInputStream in = new DataInputStream(s.getInputStream());
        assertEquals(NioWire.MAGIC, in.readInt());
        in.readFully(new byte[NioWire.HELLO - 4]);
        DataOutputStream out = new DataOutputStream(s.getOutputStream());
        out.writeInt(NioWire.MAGIC);
        out.writeShort(NioWire.REPLY_OK);
        out.writeShort(self);
        out.flush();
    }

    private static void sendUntilFailure(DXNet n, int dest, AtomicReference<Throwable> error) {
        try {
            for (int i = 0; i < 10_000_000; i++) {
                n.sendMessage(data(dest, 1000));
            }
        } catch (NetworkException e) {
            error.set(e);
        }
    }

    /** A socket's own exception gets a kind once, where it is caught; a kind already given stays. */
    @Test
    public void socketExceptionsGetTheirKindWhereTheyAreCaught() {
        assertEquals(NioFailure.REFUSED, NioFailure.of(new java.net.ConnectException("Connection refused")).kind());
        NioFailure.NioException reset = NioFailure.of(new java.io.IOException("Connection reset by peer"));
        assertEquals(NioFailure.RESET, reset.kind());
        assertEquals("Connection reset by peer", reset.getMessage());
        NioFailure.NioException idle = NioFailure.IDLE_TIMEOUT.exception("nothing received from node 3 for 10 ms");
        assertTrue(NioFailure.of(idle) == idle);
        assertEquals("ClosedChannelException", NioFailure.of(new java.nio.channels.ClosedChannelException()).getMessage());
    }

    @Test
    public void connectionRefusedIsAnExceptionAndOthersKeepWorking() throws Exception {
        DXNet a = node(0);
        DXNet b = node(2);
        a.addNode(1, "127.0.0.1:" + freePort()); // nobody listens there
        a.addNode(2, "127.0.0.1:" + b.localPort());
        b.addNode(0, "127.0.0.1:" + a.localPort());
        AtomicLong got = new AtomicLong();
        b.register(TYPE, (byte) 1, m -> got.incrementAndGet());
        long t0 = System.nanoTime();
        try {
            a.sendMessage(data(1, 10));
            fail("sent to a port nobody listens on");
        } catch (NetworkException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("node 1") && e.getMessage().toLowerCase().contains("refused"));
            assertEquals(NioFailure.REFUSED, kindOf(e));
        }
        assertTrue("refusal took too long", System.nanoTime() - t0 < 2_000_000_000L);
        for (int i = 0; i < 100; i++) {
            a.sendMessage(data(2, 10));
        }
        waitFor("got.get() == 100", 30_000, () -> got.get() == 100);
    }

    @Test
    public void failedReconnectsAreWarnedAboutAtMostOnceASecondPerNode() throws Exception {
        DXNet a = node(0);
        a.addNode(1, "127.0.0.1:" + freePort()); // nobody listens there
        List<String> warnings = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.logging.Handler h = new java.util.logging.Handler() {
            @Override
            public void publish(java.util.logging.LogRecord r) {
                if (r.getLevel().intValue() >= java.util.logging.Level.WARNING.intValue()
                        && r.getMessage() != null && r.getMessage().contains("node 1")) {
                    warnings.add(r.getMessage());
                }
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
        };
        java.util.logging.Logger log = java.util.logging.Logger.getLogger(NioTransport.class.getName());
        log.addHandler(h);
        int failures = 0;
        long t0 = System.nanoTime();
        try {
            // Each send tries a new connection and is refused; well within a second.
            while (failures < 40 && System.nanoTime() - t0 < 800_000_000L) {
                try {
                    a.sendMessage(data(1, 10));
                } catch (NetworkException expected) {
                    failures++;
                }
            }
            // The selector thread logs after the sender learnt of the failure.
            waitFor("a warning", 5_000, () -> !warnings.isEmpty());
            assertHoldsFor("one warning for all failed connects", 200, () -> warnings.size() == 1);
        } finally {
            log.removeHandler(h);
        }
        assertTrue("only " + failures + " refused sends in 800 ms", failures >= 10);
        assertTrue("warnings for " + failures + " failed connects: " + warnings, warnings.size() == 1);
    }

    @Test
    public void garbageFromANonDxnetClientIsRejected() throws Exception {
        DXNet a = node(0);
        DXNet b = node(1);
        a.addNode(1, "127.0.0.1:" + b.localPort());
        b.addNode(0, "127.0.0.1:" + a.localPort());
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), b.localPort())) {
            s.getOutputStream().write("GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            s.setSoTimeout(5_000);
            assertEquals("the node must close the connection", -1, s.getInputStream().read());
        }
        assertEquals(1L, (long) b.transportStats().get("rejected"));
        AtomicLong got = new AtomicLong();
        b.register(TYPE, (byte) 1, m -> got.incrementAndGet());
        a.sendMessage(data(1, 10));
        waitFor("got.get() == 1", 30_000, () -> got.get() == 1);
    }

    @Test
    public void unknownNodeIsRefusedWithAReason() throws Exception {
        DXNet b = node(1);
        b.addNode(0, "127.0.0.1:1"); // a known address (else the connection is refused at accept)
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), b.localPort())) {
            java.nio.ByteBuffer hello = java.nio.ByteBuffer.allocate(NioWire.HELLO);
            NioWire.putHello(hello, 0, 77, 1, 42, new byte[NioWire.NONCE], 1 << 20); // 77: not in node 1's table
            s.getOutputStream().write(hello.array());
            s.setSoTimeout(5_000);
            DataInputStream in = new DataInputStream(s.getInputStream());
            assertEquals(NioWire.MAGIC, in.readInt());
            assertEquals(NioWire.Refusal.UNKNOWN_NODE.status, in.readShort());
            assertEquals(1, in.readShort());
            assertEquals(-1, in.read());
        }
        assertEquals(1L, (long) b.transportStats().get("rejected"));
    }

    /**
     * This node is paused (its selector thread, as under SIGSTOP or a long GC)
     * for longer than its idle timeout while a peer sends: on waking it reads
     * what arrived before judging the connection silent — nothing is lost.
     */
    @Test
    public void aPauseLongerThanTheIdleTimeoutLosesNothingThatArrived() throws Exception {
        AtomicLong messages = new AtomicLong();
        NioTransport r = countingReceiver(500, messages);
        DXNet a = sender(r, 10_000); // the sender does not give up during the receiver's pause
        a.sendMessage(data(1, 100));
        waitFor("messages.get() == 1", 30_000, () -> messages.get() == 1);
        r.pauseForTest(1_500); // returns once paused
        for (int i = 0; i < 100; i++) {
            a.sendMessage(data(1, 100));
        }
        waitFor("messages.get() == 101", 30_000, () -> messages.get() == 101);
        assertEquals("the connection was judged silent", 0L, (long) r.stats().get("failures"));
    }

    /**
     * The receiver is paused beyond the sender's idle timeout: the sender
     * gives the connection up with data unconfirmed and says so — a loss
     * event naming the node — instead of losing it silently.
     */
    @Test
    public void aSenderThatGivesUpOnAPausedPeerReportsThePossibleLoss() throws Exception {
        AtomicLong messages = new AtomicLong();
        NioTransport r = countingReceiver(10_000, messages);
        DXNet a = sender(r, 500);
        java.util.concurrent.CopyOnWriteArrayList<String> losses = new java.util.concurrent.CopyOnWriteArrayList<>();
        a.setLossListener((node, bytes, reason) -> losses.add(node + ":" + bytes + ":" + reason));
        a.sendMessage(data(1, 100));
        waitFor("messages.get() == 1", 30_000, () -> messages.get() == 1);
        r.pauseForTest(3_000);
        for (int i = 0; i < 100; i++) {
            a.sendMessage(data(1, 1000));
        }
        waitFor("!losses.isEmpty()", 30_000, () -> !losses.isEmpty());
        String loss = losses.get(0);
        assertTrue(loss, loss.startsWith("1:") && Long.parseLong(loss.split(":")[1]) >= 100 * 1000);
        assertEquals(1L, (long) a.transportStats().get("possible_losses"));
    }

    /** Node 0 over nio, sending to the counting receiver {@code r}, with its own idle timeout. */
    private DXNet sender(NioTransport r, int idleTimeoutMs) throws Exception {
        DXNetConfig c = new DXNetConfig(0);
        c.transport = "nio";
        c.listen = "127.0.0.1:0";
        c.keepAliveMs = 100;
        c.idleTimeoutMs = idleTimeoutMs;
        DXNet a = DXNet.start(c);
        open.add(a);
        a.registerMessageType(TYPE, (byte) 1, BytesMessage.class);
        a.addNode(1, "127.0.0.1:" + r.localPort());
        return a;
    }

    /** A bare NIO transport as node 1 that counts the messages it receives (knows node 0 at 127.0.0.1). */
    private NioTransport countingReceiver(int idleTimeoutMs, AtomicLong messages) throws Exception {
        NioSettings rs = io.ibdxnet.TestSupport.nioSettings(new io.ibdxnet.DXNetConfig(1));
        rs.nodeId = 1;
        rs.listenHost = "127.0.0.1";
        rs.keepAliveMs = 100;
        rs.idleTimeoutMs = idleTimeoutMs;
        io.ibdxnet.core.ReceiveLimits limits = new io.ibdxnet.core.ReceiveLimits(1 << 20, 1 << 20, 1 << 20);
        AtomicReference<io.ibdxnet.core.StreamAssembler> asm = new AtomicReference<>();
        AtomicReference<NioTransport> self = new AtomicReference<>();
        NioTransport r = new NioTransport(rs, new io.ibdxnet.transport.TransportListener() {
            @Override
            public boolean onBuffer(io.ibdxnet.transport.IncomingBuffer b) {
                if (asm.get() == null || asm.get().connection() != b.connection) {
                    asm.set(new io.ibdxnet.core.StreamAssembler(b.source, b.connection, limits));
                }
                try {
                    asm.get().feed(b.address, b.length, (src, t, st, fl, req, base, off, len) -> messages.incrementAndGet());
                } catch (io.ibdxnet.core.ProtocolViolation e) {
                    throw new IllegalStateException(e);
                }
                b.release();
                self.get().consumed(b);
                return true;
            }

            @Override
            public void onDisconnected(int node) {}
        });
        self.set(r);
        open.add(r);
        r.addNode(0, "127.0.0.1", 1);
        return r;
    }

    /**
     * A peer whose connection went stale on its side (it gave up, our side
     * still holds it) connects again with the same instance: the first try
     * succeeds and replaces the stale connection.
     */
    @Test
    public void aReconnectReplacesAStaleConnectionAtTheFirstTry() throws Exception {
        DXNet b = node(1);
        b.addNode(0, "127.0.0.1:1"); // node 0 = our raw clients (from 127.0.0.1)
        try (Socket stale = new Socket(InetAddress.getLoopbackAddress(), b.localPort())) {
            assertEquals(NioWire.REPLY_OK, hello(stale, 0, 1, 4242));
            try (Socket fresh = new Socket(InetAddress.getLoopbackAddress(), b.localPort())) {
                assertEquals("the reconnect is accepted at once", NioWire.REPLY_OK, hello(fresh, 0, 1, 4242));
                stale.setSoTimeout(5_000);
                assertEquals("the stale connection is closed", -1, stale.getInputStream().read());
            }
        }
        assertEquals(0L, (long) b.transportStats().get("rejected"));
    }

    /** Writes an unkeyed hello; returns the reply's status. */
    private static int hello(Socket s, int source, int destination, long instance) throws IOException {
        java.nio.ByteBuffer h = java.nio.ByteBuffer.allocate(NioWire.HELLO);
        NioWire.putHello(h, 0, source, destination, instance, new byte[NioWire.NONCE], 1 << 20);
        s.getOutputStream().write(h.array());
        s.setSoTimeout(5_000);
        DataInputStream in = new DataInputStream(s.getInputStream());
        assertEquals(NioWire.MAGIC, in.readInt());
        int status = in.readShort();
        assertEquals(destination, in.readShort());
        return status;
    }

    @Test
    public void halfOpenPeerIsDetectedAndPendingRequestsFail() throws Exception {
        DXNet a = node(0);
        // Answers the handshake, then neither reads nor writes: a half-open connection.
        ServerSocket fake = fakePeer(s -> {
            handshake(s, 1);
            try {
                Thread.sleep(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        a.addNode(1, "127.0.0.1:" + fake.getLocalPort());
        long t0 = System.nanoTime();
        CompletableFuture<BytesResponse> f = a.sendAsync(new BytesRequest(1, new byte[8]));
        try {
            f.get(10, TimeUnit.SECONDS);
            fail("answered by a silent peer");
        } catch (ExecutionException expected) {
            assertTrue(expected.getCause().getMessage(), expected.getCause() instanceof NetworkException);
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertTrue("detected after " + ms + " ms (idle timeout 600 ms)", ms >= 500 && ms < 5_000);
        assertTrue(a.transportStats().get("failures") >= 1);
    }

    @Test
    public void peerResetMidStreamFailsTheSender() throws Exception {
        DXNet a = node(0);
        ServerSocket fake = fakePeer(s -> {
            handshake(s, 1);
            s.getInputStream().read(new byte[100_000]); // some of the stream, then a reset
            s.setSoLinger(true, 0);
        });
        a.addNode(1, "127.0.0.1:" + fake.getLocalPort());
        AtomicReference<Throwable> error = new AtomicReference<>();
        Thread sender = new Thread(() -> sendUntilFailure(a, 1, error));
        sender.start();
        sender.join(15_000);
        assertTrue("sender still running", !sender.isAlive());
        assertTrue(String.valueOf(error.get()), error.get() instanceof NetworkException);
    }

    @Test
    public void noThreadsLeakOverManyNodeLifetimes() throws Exception {
        int before = Thread.activeCount();
        for (int round = 0; round < 15; round++) {
            DXNet a = node(0);
            DXNet b = node(1);
            a.addNode(1, "127.0.0.1:" + b.localPort());
            b.addNode(0, "127.0.0.1:" + a.localPort());
            AtomicLong got = new AtomicLong();
            b.register(TYPE, (byte) 1, m -> got.incrementAndGet());
            for (int i = 0; i < 100; i++) {
                a.sendMessage(data(1, 100));
            }
            waitFor("got.get() == 100", 30_000, () -> got.get() == 100);
            a.close();
            b.close();
            open.clear();
        }
        awaitNodeThreadsGone();
        assertTrue("threads grew from " + before + " to " + Thread.activeCount(), Thread.activeCount() <= before + 2);
    }

    static Message data(int dest, int size) {
        return new BytesMessage(dest, new byte[size]);
    }

    /** The kind a NIO connection failure carries to the sender's exception (through its causes), or null. */
    static NioFailure kindOf(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof NioFailure.NioException) {
                return ((NioFailure.NioException) t).kind();
            }
        }
        return null;
    }
}
