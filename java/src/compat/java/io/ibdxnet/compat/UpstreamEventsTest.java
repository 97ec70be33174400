package io.ibdxnet.compat;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;

import de.hhu.bsinfo.dxnet.ib.MsgrcJNIBinding;
import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import io.ibdxnet.core.Frame;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.After;
import org.junit.Test;

/**
 * Upstream's events and connections as its C++ gave them (compat/upstream/EVENTS.md),
 * in one JVM on the sim fabric ({@link UpstreamFixture}).
 */
public class UpstreamEventsTest extends UpstreamFixture {
    /**
     * As upstream's C++, the library evicts nothing by default: upstream's limit only
     * sizes the queues (upstream Java dismisses connections itself).
     */
    @Test(timeout = 120_000)
    public void noNativeEvictionByDefault() throws Exception {
        BlockingQueue<byte[]> got0 = new LinkedBlockingQueue<>();
        BlockingQueue<byte[]> got2 = new LinkedBlockingQueue<>();
        node0 = startNode0(got0);
        node2 = startNode(2, "127.0.0.3", got2);
        UpstreamPeer peer = startUpstream(new UpstreamPeer(RING), KEYS, 1, 0x7F000001, 0x7F000003);
        connect(peer, 0);
        exchange(peer, node0, 0, got0, "to 0");
        Thread.sleep(200); // idle long enough to be evicted, were eviction on
        waitFor("node 2 discovered", () -> MsgrcJNIBinding.createConnection((short) 2) == 0);
        Thread.sleep(300);
        for (String e : peer.events) {
            assertFalse("no eviction: " + peer.events, e.startsWith("disconnected") || e.startsWith("invalidated"));
        }
        assertNotEquals("node 0's connection stays", -1L, MsgrcJNIBinding.getSendBufferAddress((short) 0));
        assertTrue("no failure in the up-calls: " + peer.failures, peer.failures.isEmpty());
    }

    /**
     * With eviction configured ({@code evict_at_limit=true}), our limit closes
     * connections upstream Java still holds (it has no close native): the eviction
     * reaches Java as nodeDisconnected, and it reconnects.
     */
    @Test(timeout = 120_000)
    public void evictionAtTheConnectionLimitIsReportedAsDisconnected() throws Exception {
        BlockingQueue<byte[]> got0 = new LinkedBlockingQueue<>();
        BlockingQueue<byte[]> got2 = new LinkedBlockingQueue<>();
        node0 = startNode0(got0);
        node2 = startNode(2, "127.0.0.3", got2);
        UpstreamPeer peer =
                startUpstream(new UpstreamPeer(RING), KEYS + ";evict_at_limit=true", 1, 0x7F000001, 0x7F000003);
        peer.events.clear();
        connect(peer, 0);
        exchange(peer, node0, 0, got0, "to 0");
        Thread.sleep(200); // only connections idle for a moment are evicted
        waitFor("node 2 discovered", () -> MsgrcJNIBinding.createConnection((short) 2) == 0);
        // Node 0's connection made room for node 2's.
        expectEvent(peer, "disconnected 0");
        connect(peer, 2);
        exchange(peer, node2, 2, got2, "to 2");
        peer.events.clear();
        Thread.sleep(200);
        connect(peer, 0);
        expectEvent(peer, "disconnected 2");
        exchange(peer, node0, 0, got0, "to 0 again");
        assertTrue("no failure in the up-calls: " + peer.failures, peer.failures.isEmpty());
    }

    /**
     * Upstream Java closes connections itself (its limit, its shutdown) and never
     * tells the library; a peer leaving afterwards must not make its handler throw
     * (upstream's nodeDisconnected dereferences the connection it no longer has).
     */
    @Test(timeout = 120_000)
    public void aPeerLeavingAfterJavaClosedItsConnectionThrowsNothing() throws Exception {
        BlockingQueue<byte[]> got = new LinkedBlockingQueue<>();
        node0 = startNode0(got);
        UpstreamPeer peer = startUpstream(new UpstreamPeer(RING));
        connect(peer, 0);
        exchange(peer, got, "before");
        peer.m_connections[0] = null; // Java's own dismissal: the library is not told
        peer.events.clear();
        node0.close();
        node0 = null;
        expectNext(peer, "invalidated 0");
        Thread.sleep(300);
        assertTrue("no nodeDisconnected for a connection Java closed: " + peer.events, peer.events.isEmpty());
        assertTrue("no failure in the up-calls: " + peer.failures, peer.failures.isEmpty());
    }

    /**
     * Upstream's {@code received} may take fewer entries than offered (its incoming
     * queue is full) and connects from inside it: the rest are offered again, in
     * order, and nothing is delivered twice or lost.
     */
    @Test(timeout = 120_000)
    public void receivedTakingOneEntryAtATimeAndConnectingFromInside() throws Exception {
        node0 = startNode0(new LinkedBlockingQueue<>());
        UpstreamPeer peer = new UpstreamPeer(RING);
        peer.maxTakenPerCall = 1;
        peer.connectInReceived = true;
        startUpstream(peer);
        int n = 300;
        for (int i = 0; i < n; i++) { // ours connects; upstream's side first connects inside received
            byte[] b = new byte[100 + i % 5000];
            b[0] = (byte) (i >>> 8);
            b[1] = (byte) i;
            node0.sendMessage(new BytesMessage(1, b));
        }
        for (int i = 0; i < n; i++) {
            UpstreamPeer.Received r = nextFrame(peer);
            int seq = (r.payload[4] & 0xFF) << 8 | (r.payload[5] & 0xFF);
            assertEquals("in order, none twice", i, seq);
            assertEquals(4 + 100 + i % 5000, r.payload.length);
        }
        Thread.sleep(200);
        assertTrue("nothing more: " + peer.frames.size(), peer.frames.isEmpty());
        assertEquals("createConnection inside received", 0, peer.failedConnectsInReceived.get());
        assertTrue("no failure in the up-calls: " + peer.failures, peer.failures.isEmpty());
    }
}
