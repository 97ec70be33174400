package io.ibdxnet.nio;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.DXNetConfig;
import io.ibdxnet.TestSupport;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.TransportListener;
import java.io.DataInputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Admission before resources ({@link NioAdmission}) on one host: 127.0.0.0/8
 * gives the sources their addresses. Strangers never take a handshake slot,
 * a known address holds at most {@link NioAdmission#PER_ADDRESS}, a stalled
 * hello ends at its own deadline, and a known node always finds a slot.
 * (Across real hosts, with a thousand sockets: {@link IdleFloodAdmissionTest}.)
 */
public class NioAdmissionTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    private final List<AutoCloseable> open = new ArrayList<>();

    @After
    public void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    /** A bare transport as node 1 on 127.0.0.1 (it drops what it receives); a long connect timeout. */
    private NioTransport node(int helloTimeoutMs, boolean checkAddress) throws Exception {
        NioSettings s = TestSupport.nioSettings(new DXNetConfig(1));
        s.listenHost = "127.0.0.1";
        s.connectTimeoutMs = 20_000;
        s.helloTimeoutMs = helloTimeoutMs;
        s.checkPeerAddress = checkAddress;
        NioTransport t = new NioTransport(s, new TransportListener() {
            @Override
            public boolean onBuffer(IncomingBuffer b) {
                b.release();
                return true;
            }

            @Override
            public void onDisconnected(int node) {}
        });
        open.add(t);
        return t;
    }

    private Socket silent(String from, int port) throws IOException {
        Socket s = new Socket();
        open.add(s);
        s.bind(new InetSocketAddress(from, 0));
        s.connect(new InetSocketAddress("127.0.0.1", port));
        return s;
    }

    /** True if the node closed {@code s} (end of stream or reset) within {@code ms}; nothing may be read. */
    static boolean closedByNode(Socket s, int ms) throws IOException {
        s.setSoTimeout(ms);
        try {
            assertEquals("the node sent nothing before closing", -1, s.getInputStream().read());
            return true;
        } catch (SocketTimeoutException e) {
            return false;
        } catch (SocketException e) {
            return true; // reset
        }
    }

    /** A connection from {@code from} is closed at once, unanswered, whatever it says. */
    static void assertResetAtAccept(String from, int port) throws IOException {
        try (Socket s = new Socket()) {
            s.bind(new InetSocketAddress(from, 0));
            s.connect(new InetSocketAddress("127.0.0.1", port));
            try {
                s.getOutputStream().write(new byte[NioWire.HELLO]);
            } catch (SocketException e) {
                return; // reset already
            }
            assertTrue("connection from " + from + " still open after 2 s", closedByNode(s, 2_000));
        }
    }

    /** An unkeyed hello claiming {@code source} from {@code from}: the reply status. */
    static int helloStatus(String from, int port, int source) throws IOException {
        try (Socket s = new Socket()) {
            s.bind(new InetSocketAddress(from, 0));
            s.connect(new InetSocketAddress("127.0.0.1", port));
            s.setSoTimeout(5_000);
            ByteBuffer b = ByteBuffer.allocate(NioWire.HELLO);
            NioWire.putHello(b, 0, source, 1, 7, new byte[NioWire.NONCE], 1 << 20);
            s.getOutputStream().write(b.array());
            DataInputStream in = new DataInputStream(s.getInputStream());
            assertEquals(NioWire.MAGIC, in.readInt());
            return in.readShort() & 0xFFFF;
        }
    }

    private static long stat(NioTransport t, String name) {
        Long v = t.stats().get(name);
        assertTrue("no counter " + name + " in " + t.stats(), v != null);
        return v;
    }

    @Test
    public void strangersAreResetAtAcceptAndNeverTakeASlot() throws Exception {
        NioTransport t = node(20_000, true);
        t.addNode(0, "127.0.0.1", 1);
        t.addNode(5, "0.0.0.0", 1); // a wildcard entry makes no address known
        List<Socket> strangers = new ArrayList<>();
        for (int i = 0; i < NioAdmission.MAX_PENDING + 72; i++) {
            strangers.add(silent("127.0.0.2", t.localPort()));
        }
        waitFor("all refused at accept", 30_000,
                () -> stat(t, "accepts_refused_unknown_address") == NioAdmission.MAX_PENDING + 72);
        for (Socket s : strangers) {
            assertTrue(closedByNode(s, 2_000));
        }
        assertEquals(NioWire.REPLY_OK, helloStatus("127.0.0.1", t.localPort(), 0));
        assertEquals(0, stat(t, "hellos_refused_busy") + stat(t, "handshakes_displaced") + stat(t, "hellos_refused_timeout"));
    }

    @Test
    public void aKnownAddressHoldsAtMostItsCapTheOldestSilentHandshakeMakesRoom() throws Exception {
        NioTransport t = node(20_000, true);
        t.addNode(0, "127.0.0.1", 1);
        capHolds(t, "127.0.0.1", 0);
    }

    @Test
    public void withoutTheAddressCheckEveryAddressIsStillCapped() throws Exception {
        NioTransport t = node(20_000, false);
        t.addNode(0, "127.0.0.1", 1);
        capHolds(t, "127.0.0.2", 0);
        assertEquals(0, stat(t, "accepts_refused_unknown_address"));
    }

    /** 10 silent sockets from {@code from}: the 6 oldest are closed at once, 4 stay; then node {@code node} still gets in. */
    private void capHolds(NioTransport t, String from, int node) throws Exception {
        int extra = 6;
        List<Socket> silent = new ArrayList<>();
        for (int i = 0; i < NioAdmission.PER_ADDRESS + extra; i++) {
            silent.add(silent(from, t.localPort()));
        }
        waitFor("displaced == " + extra, 30_000, () -> stat(t, "handshakes_displaced") == extra);
        for (int i = 0; i < extra; i++) {
            assertTrue("the oldest are closed: " + i, closedByNode(silent.get(i), 2_000));
        }
        for (int i = extra; i < silent.size(); i++) {
            assertTrue("the newest " + NioAdmission.PER_ADDRESS + " stay: " + i, !closedByNode(silent.get(i), 100));
        }
        // The honest node at that address: its hello comes with the connection, it displaces a silent one.
        assertEquals(NioWire.REPLY_OK, helloStatus(from, t.localPort(), node));
        assertEquals(extra + 1, stat(t, "handshakes_displaced"));
        assertEquals(0, stat(t, "hellos_refused_busy"));
    }

    /**
     * Accepts come in bursts before the selector reports reads: a silent
     * handshake whose hello came meanwhile is read once more before it is
     * displaced, and is kept; the next silent one goes instead.
     */
    @Test
    public void aSilentHandshakeIsHeardOnceMoreBeforeItIsDisplaced() throws Exception {
        NioAdmission a = new NioAdmission(1, null, false);
        InetAddress from = InetAddress.getByName("127.0.0.1");
        List<NioChannel> slots = new ArrayList<>();
        for (int i = 0; i < NioAdmission.PER_ADDRESS; i++) {
            assertTrue(a.makeRoom(from, c -> fail("displaced below the cap"), c -> {
                fail("heard below the cap");
                return false;
            }));
            NioChannel c = NioChannel.incoming(i, null, from);
            c.handshake = new NioHandshake.Pending();
            a.admitted(c);
            slots.add(c);
        }
        List<NioChannel> heard = new ArrayList<>();
        List<NioChannel> displaced = new ArrayList<>();
        // The oldest (the first to go) said its hello during the burst.
        assertTrue(a.makeRoom(from, displaced::add, c -> {
            heard.add(c);
            if (c == slots.get(0)) {
                c.handshake.step = 1;
                return true;
            }
            return false;
        }));
        assertEquals("the oldest, then the next silent one, were heard", Arrays.asList(slots.get(0), slots.get(1)), heard);
        assertEquals("the next silent one was displaced", Collections.singletonList(slots.get(1)), displaced);
        assertEquals(1, a.displaced.get());
        NioChannel newer = NioChannel.incoming(NioAdmission.PER_ADDRESS, null, from);
        newer.handshake = new NioHandshake.Pending();
        a.admitted(newer);
        // At the cap again: the oldest has gone further than every silent one, it is neither heard nor displaced.
        heard.clear();
        displaced.clear();
        assertTrue(a.makeRoom(from, displaced::add, c -> heard.add(c) && false));
        assertEquals(Collections.singletonList(slots.get(2)), displaced);
        assertEquals(Collections.singletonList(slots.get(2)), heard);
    }

    @Test
    public void aStalledHelloIsClosedAtItsOwnDeadlineNotTheConnectTimeout() throws Exception {
        NioTransport t = node(500, true);
        t.addNode(0, "127.0.0.1", 1);
        ByteBuffer hello = ByteBuffer.allocate(NioWire.HELLO);
        NioWire.putHello(hello, 0, 0, 1, 7, new byte[NioWire.NONCE], 1 << 20);
        for (byte[] said : new byte[][] {{}, Arrays.copyOf(hello.array(), 20)}) {
            Socket s = silent("127.0.0.1", t.localPort());
            long t0 = System.nanoTime();
            s.getOutputStream().write(said);
            assertTrue("closed within 3 s (connectTimeoutMs is 20 s)", closedByNode(s, 3_000));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue("closed after " + ms + " ms, not before the 500 ms deadline", ms >= 400);
        }
        assertEquals(2, stat(t, "hellos_refused_timeout"));
    }

    @Test
    public void whenKnownAddressesHoldEverySlotANewAddressStillGetsOne() throws Exception {
        NioTransport t = node(20_000, true);
        int addresses = NioAdmission.MAX_PENDING / NioAdmission.PER_ADDRESS + 8;
        for (int i = 0; i < addresses; i++) {
            t.addNode(10 + i, "127.0.0." + (10 + i), 1);
        }
        t.addNode(0, "127.0.0.1", 1);
        for (int i = 0; i < addresses; i++) {
            for (int j = 0; j < NioAdmission.PER_ADDRESS; j++) {
                silent("127.0.0." + (10 + i), t.localPort());
            }
        }
        int over = addresses * NioAdmission.PER_ADDRESS - NioAdmission.MAX_PENDING;
        // Every connection beyond the slots displaced one or was refused: never more than MAX_PENDING pending.
        waitFor("displaced + busy == " + over, 30_000,
                () -> stat(t, "handshakes_displaced") + stat(t, "hellos_refused_busy") == over);
        assertEquals(0, stat(t, "hellos_refused_timeout"));
        long before = stat(t, "handshakes_displaced");
        assertEquals(NioWire.REPLY_OK, helloStatus("127.0.0.1", t.localPort(), 0));
        assertEquals("the known node displaced the busiest address's oldest", before + 1, stat(t, "handshakes_displaced"));
    }
}
