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
 * The contract of upstream's {@code MsgrcJNIBinding} on our library, in one JVM
 * on the sim fabric ({@link UpstreamFixture}): discovery, data both ways, losses,
 * configuration, idleness.
 */
public class UpstreamBindingTest extends UpstreamFixture {
    @Test(timeout = 120_000)
    public void bothWaysLostAndRediscoveredAndThrowingCallbacks() throws Exception {
        BlockingQueue<byte[]> got = new LinkedBlockingQueue<>();
        node0 = startNode0(got); // loads the library (and the io.ibdxnet natives)
        System.setProperty("ibdxnet.compat.listen", "127.0.0.2:" + PORT);
        System.setProperty("ibdxnet.compat.keys", KEYS);
        UpstreamPeer peer = new UpstreamPeer(RING);
        assertTrue("init", initUpstream(peer, RING));
        upstreamUp = true;
        assertFalse("a second init is refused", initUpstream(new UpstreamPeer(RING), RING));

        // Discovery by address, as upstream's IBConnectionManager does for every mapping.
        MsgrcJNIBinding.addNode(0x7F000001); // 127.0.0.1
        expectEvent(peer, "discovered 0");
        assertEquals("unknown node", 2, MsgrcJNIBinding.createConnection((short) 9));
        assertEquals("unreachable", -1L, MsgrcJNIBinding.getSendBufferAddress((short) 9));
        connect(peer, 0);
        exchange(peer, got, "first");

        // Throwing call-backs: counted and cleared, the engine goes on.
        peer.throwInReceived.set(true);
        peer.throwInSend.set(true);
        exchange(peer, got, "after throwing");
        assertFalse(peer.throwInReceived.get());
        assertFalse(peer.throwInSend.get());
        MsgrcJNIBinding.returnRecvBuffer(0xFFFF_FFFFL); // an unknown handle: logged, nothing else

        // Node 0 goes away (its engine leaves): upstream hears what its C++ said
        // on a lost connection, nodeInvalidated then nodeDisconnected, and a
        // createConnection meanwhile fails at once (not after the 5 s timeout).
        peer.events.clear();
        node0.close();
        node0 = null;
        expectNext(peer, "invalidated 0");
        expectNext(peer, "disconnected 0");
        long t0 = System.nanoTime();
        assertNotEquals("createConnection to a lost node", 0, MsgrcJNIBinding.createConnection((short) 0));
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue("createConnection to a lost node took " + ms + " ms", ms < 1000);
        // ... and comes back on the same address: rediscovered, connected anew.
        node0 = startNode0(got);
        expectEvent(peer, "discovered 0");
        connect(peer, 0);
        exchange(peer, got, "again");
        assertTrue("no failure in the up-calls: " + peer.failures, peer.failures.isEmpty());

        assertTrue(MsgrcJNIBinding.shutdown());
        upstreamUp = false;
        assertTrue("shutdown twice", MsgrcJNIBinding.shutdown());
    }

    @Test(timeout = 60_000)
    public void badConfigurationIsRefused() throws Exception {
        node0 = startNode0(new LinkedBlockingQueue<>());
        System.setProperty("ibdxnet.compat.keys", KEYS);
        UpstreamPeer peer = new UpstreamPeer(RING);
        assertFalse("not a power of two", initUpstream(peer, 3_000_000));
        assertFalse("pool below srq × SGEs", MsgrcJNIBinding.init(peer, false, false, 0, (short) 1, 5000, 100, 20,
                2000, 2000, 2000, RING, 1000L * 32768, 32768, 4));
        assertEquals("before init", 2, MsgrcJNIBinding.createConnection((short) 0));
        assertEquals(-1L, MsgrcJNIBinding.getSendBufferAddress((short) 0));
        MsgrcJNIBinding.returnRecvBuffer(5);
        MsgrcJNIBinding.addNode(0x7F000001);
        assertTrue(MsgrcJNIBinding.shutdown());
    }

    /** As upstream's C++: no RDMA device, no init, unless the simulation is asked for. */

    @Test(timeout = 60_000)
    public void initWithoutAnRdmaDeviceFailsUnlessSimIsAskedFor() throws Exception {
        String[] devices = new java.io.File("/sys/class/infiniband").list();
        org.junit.Assume.assumeTrue("an RDMA device is present", devices == null || devices.length == 0);
        org.junit.Assume.assumeTrue("IBDXNET_FABRIC is set", System.getenv("IBDXNET_FABRIC") == null);
        node0 = startNode0(new LinkedBlockingQueue<>()); // loads the library
        System.setProperty("ibdxnet.compat.listen", "127.0.0.2:" + PORT);
        System.clearProperty("ibdxnet.compat.keys");
        assertFalse("init without a device", initUpstream(new UpstreamPeer(RING), RING));
        System.setProperty("ibdxnet.compat.keys", "fabric=sim");
        assertTrue("init on sim, asked for", initUpstream(new UpstreamPeer(RING), RING));
        upstreamUp = true;
    }

    /**
     * Upstream Java never rings the send thread's doorbell: a message it writes after
     * the engine went idle must not wait for a sleeping thread (it waited up to the
     * 100 ms sleep timeout). The medians are far from that bound; the figures are
     * measured by bench/upstream-idle.sh.
     */
    @Test(timeout = 120_000)
    public void aMessageAfterIdlenessIsNotHeldBySleepingThreads() throws Exception {
        BlockingQueue<byte[]> got = new LinkedBlockingQueue<>();
        node0 = startNode0(got);
        UpstreamPeer peer = startUpstream(new UpstreamPeer(RING));
        connect(peer, 0);
        exchange(peer, got, "warm-up");
        byte[] hello = "idle".getBytes(StandardCharsets.UTF_8);
        for (long gap : new long[] {10, 100, 1000}) {
            int samples = gap < 1000 ? 7 : 3;
            long[] ms = new long[samples];
            for (int i = 0; i < samples; i++) {
                Thread.sleep(gap);
                long t0 = System.nanoTime();
                peer.sendFrame(BytesMessage.TYPE.type(), BytesMessage.TYPE.subtype(), Frame.FIRST | Frame.LAST, 0,
                        UpstreamPeer.byteArrayPayload(hello));
                assertArrayEquals(hello, got.poll(20, TimeUnit.SECONDS));
                ms[i] = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            }
            java.util.Arrays.sort(ms);
            assertTrue("after " + gap + " ms idle: " + java.util.Arrays.toString(ms) + " ms", ms[samples / 2] < 20);
        }
    }
}
