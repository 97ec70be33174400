package io.ibdxnet.nio;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.DXNet;
import io.ibdxnet.NetworkException;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The NIO trust boundary's pre-shared key: keyed nodes talk, keyed and
 * unkeyed ones refuse each other, a wrong key, an acceptor that does not
 * prove the key, a raw hello without it and a recorded handshake replayed
 * byte for byte are refused and counted, and the key never shows in a message.
 */
public class NioPreSharedKeyTest extends NioTrustFixture {
    @Rule
    public final Timeout timeout = Timeout.seconds(60);

    private DXNet keyed(int id, Path keyFile) throws Exception {
        return node(id, c -> c.authKeyFile = keyFile.toString());
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
