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
 * on the sim fabric: upstream's real binding class (dxnet.jar, unchanged) driven
 * by {@link UpstreamPeer} as node 1 (listening on 127.0.0.2 through the compat
 * listen override), against our own DXNet node 0 on transport ib (127.0.0.1,
 * same port, same library instance, same sim network).
 */
public class UpstreamBindingTest {
    static final int RING = 1 << 20;
    static final int PORT = 20000 + ThreadLocalRandom.current().nextInt(20000);
    /** Upstream's node on sim (asked for: without an RDMA device init refuses otherwise). */
    static final String KEYS = "fabric=sim;discovery_interval_ms=100;parking_yield_after_ms=0";

    private DXNet node0;
    private DXNet node2;
    private boolean upstreamUp;

    @After
    public void tearDown() {
        if (upstreamUp) {
            assertTrue(MsgrcJNIBinding.shutdown());
        }
        if (node0 != null) {
            node0.close();
        }
        if (node2 != null) {
            node2.close();
        }
    }

    /** Our node 0 on 127.0.0.1, answering BytesRequests and collecting BytesMessages. */
    private DXNet startNode0(BlockingQueue<byte[]> got) throws Exception {
        return startNode(0, "127.0.0.1", got);
    }

    /** Our node {@code id} on {@code ip} (upstream's port), answering BytesRequests and collecting BytesMessages. */
    private static DXNet startNode(int id, String ip, BlockingQueue<byte[]> got) throws Exception {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = "ib";
        c.nativeConfig.put("fabric", "sim");
        c.nativeConfig.put("listen", ip + ":" + PORT);
        c.nativeConfig.put("send_ring_size", Integer.toString(256 << 10));
        c.nativeConfig.put("srq_size", "128");
        c.nativeConfig.put("recv_buffer_count", "1024");
        c.nativeConfig.put("discovery_interval_ms", "100");
        c.nativeConfig.put("parking_yield_after_ms", "0");
        c.flowControlWindow = 1 << 20;
        DXNet n = DXNet.start(c);
        n.register(BytesMessage.class, m -> got.add(m.bytes));
        n.register(BytesRequest.class, r -> n.reply(r, new BytesResponse(r, ("re:" + new String(r.bytes,
                StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8))));
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        n.addNode(1, "127.0.0.2:" + PORT);
        return n;
    }

    /** Upstream's init as IBConnectionManager calls it, with small sizes. */
    private static boolean initUpstream(UpstreamPeer peer, int ringSize) {
        return initUpstream(peer, ringSize, 100);
    }

    private static boolean initUpstream(UpstreamPeer peer, int ringSize, int maxConnections) {
        return MsgrcJNIBinding.init(peer, false, false, 0, (short) 1, 5000, maxConnections, 20, 128, 2000, 2000,
                ringSize, 1024L * 32768, 32768, 4);
    }

    private static void waitFor(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(10);
        }
    }

    private static void expectEvent(UpstreamPeer peer, String event) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true) {
            String e = peer.events.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            if (e == null) {
                throw new AssertionError("no '" + event + "' event");
            }
            if (e.equals(event)) {
                return;
            }
        }
    }

    /** The next event must be {@code event} (nothing else first). */
    private static void expectNext(UpstreamPeer peer, String event) throws InterruptedException {
        String e = peer.events.poll(20, TimeUnit.SECONDS);
        assertEquals("the next event", event, e);
    }

    private static UpstreamPeer.Received nextFrame(UpstreamPeer peer) throws InterruptedException {
        UpstreamPeer.Received r = peer.frames.poll(20, TimeUnit.SECONDS);
        if (r == null) {
            throw new AssertionError("no frame arrived (failures: " + peer.failures + ")");
        }
        return r;
    }

    /** createConnection then getSendBufferAddress, as upstream's createConnection does. */
    private static long connect(UpstreamPeer peer, int node) {
        assertEquals("createConnection", 0, MsgrcJNIBinding.createConnection((short) node));
        long ring = MsgrcJNIBinding.getSendBufferAddress((short) node);
        assertNotEquals("getSendBufferAddress", -1L, ring);
        peer.connect(node, ring);
        return ring;
    }

    private void exchange(UpstreamPeer peer, BlockingQueue<byte[]> got, String tag) throws Exception {
        exchange(peer, node0, 0, got, tag);
    }

    private static void exchange(UpstreamPeer peer, DXNet ours, int oursId, BlockingQueue<byte[]> got, String tag)
            throws Exception {
        // Upstream → ours: a message, through the packed structs and the completions.
        byte[] hello = ("hello " + tag).getBytes(StandardCharsets.UTF_8);
        peer.sendFrame(BytesMessage.TYPE.type(), BytesMessage.TYPE.subtype(), Frame.FIRST | Frame.LAST, 0,
                UpstreamPeer.byteArrayPayload(hello));
        byte[] in = got.poll(20, TimeUnit.SECONDS);
        assertArrayEquals(hello, in);
        // A request our node answers: back through the incoming ring.
        peer.sendFrame(BytesRequest.TYPE.type(), BytesRequest.TYPE.subtype(), Frame.FIRST | Frame.LAST | Frame.REQUEST,
                77, UpstreamPeer.byteArrayPayload(tag.getBytes(StandardCharsets.UTF_8)));
        UpstreamPeer.Received r = nextFrame(peer);
        assertEquals(BytesResponse.TYPE.type(), r.type);
        assertEquals(BytesResponse.TYPE.subtype(), r.subtype);
        assertTrue("RESPONSE flag", (r.flags & Frame.RESPONSE) != 0);
        assertEquals(77, r.requestId);
        assertArrayEquals(UpstreamPeer.byteArrayPayload(("re:" + tag).getBytes(StandardCharsets.UTF_8)), r.payload);
        // Ours → upstream: a message through the incoming ring; buffers returned.
        long returned = peer.buffersReturned.get();
        byte[] data = new byte[3000];
        ThreadLocalRandom.current().nextBytes(data);
        ours.sendMessage(new BytesMessage(1, data));
        UpstreamPeer.Received m = nextFrame(peer);
        assertEquals(oursId, m.source);
        assertArrayEquals(UpstreamPeer.byteArrayPayload(data), m.payload);
        assertTrue(peer.buffersReturned.get() > returned);
        waitFor("completions confirm what upstream sent", () -> peer.bytesConfirmed.get() > 0);
    }

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
        System.setProperty("ibdxnet.compat.listen", "127.0.0.2:" + PORT);
        System.setProperty("ibdxnet.compat.keys", KEYS);
        UpstreamPeer peer = new UpstreamPeer(RING);
        assertTrue("init", initUpstream(peer, RING, 1));
        upstreamUp = true;
        MsgrcJNIBinding.addNode(0x7F000001);
        MsgrcJNIBinding.addNode(0x7F000003);
        expectEvent(peer, "discovered 0");
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
        System.setProperty("ibdxnet.compat.listen", "127.0.0.2:" + PORT);
        System.setProperty("ibdxnet.compat.keys", KEYS + ";evict_at_limit=true");
        UpstreamPeer peer = new UpstreamPeer(RING);
        assertTrue("init", initUpstream(peer, RING, 1));
        upstreamUp = true;
        MsgrcJNIBinding.addNode(0x7F000001); // 127.0.0.1
        MsgrcJNIBinding.addNode(0x7F000003); // 127.0.0.3
        expectEvent(peer, "discovered 0");
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
     * Upstream Java closes connections itself (its limit, its shutdown) and never
     * tells the library; a peer leaving afterwards must not make its handler throw
     * (upstream's nodeDisconnected dereferences the connection it no longer has).
     */
    @Test(timeout = 120_000)
    public void aPeerLeavingAfterJavaClosedItsConnectionThrowsNothing() throws Exception {
        BlockingQueue<byte[]> got = new LinkedBlockingQueue<>();
        node0 = startNode0(got);
        System.setProperty("ibdxnet.compat.listen", "127.0.0.2:" + PORT);
        System.setProperty("ibdxnet.compat.keys", KEYS);
        UpstreamPeer peer = new UpstreamPeer(RING);
        assertTrue("init", initUpstream(peer, RING));
        upstreamUp = true;
        MsgrcJNIBinding.addNode(0x7F000001);
        expectEvent(peer, "discovered 0");
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
     * Upstream Java never rings the send thread's doorbell: a message it writes after
     * the engine went idle must not wait for a sleeping thread (it waited up to the
     * 100 ms sleep timeout). The medians are far from that bound; the figures are
     * measured by bench/upstream-idle.sh.
     */
    @Test(timeout = 120_000)
    public void aMessageAfterIdlenessIsNotHeldBySleepingThreads() throws Exception {
        BlockingQueue<byte[]> got = new LinkedBlockingQueue<>();
        node0 = startNode0(got);
        System.setProperty("ibdxnet.compat.listen", "127.0.0.2:" + PORT);
        System.setProperty("ibdxnet.compat.keys", KEYS);
        UpstreamPeer peer = new UpstreamPeer(RING);
        assertTrue("init", initUpstream(peer, RING));
        upstreamUp = true;
        MsgrcJNIBinding.addNode(0x7F000001);
        expectEvent(peer, "discovered 0");
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
