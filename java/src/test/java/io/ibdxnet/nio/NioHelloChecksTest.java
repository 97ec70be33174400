package io.ibdxnet.nio;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.DXNet;
import java.net.Socket;
import java.util.Arrays;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The NIO trust boundary without a key: the address check (a connection from
 * an address the node table does not give, a hello claiming a node the table
 * puts elsewhere; switched off), a flow-control unit out of range, an
 * unknown node, and clients that say nothing — each refusal counted by
 * reason, the honest peers undisturbed.
 */
public class NioHelloChecksTest extends NioTrustFixture {
    @Rule
    public final Timeout timeout = Timeout.seconds(60);

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
}
