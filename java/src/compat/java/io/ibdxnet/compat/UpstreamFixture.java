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

/**
 * What the drop-in's contract tests share: upstream's real binding class
 * (dxnet.jar, unchanged) driven by {@link UpstreamPeer} as node 1 (listening on
 * 127.0.0.2 through the compat listen override), our own DXNet nodes on
 * transport ib (127.0.0.1, 127.0.0.3; same port, same library instance, same sim
 * network), and the steps the tests take with them.
 */
abstract class UpstreamFixture {
    static final int RING = 1 << 20;
    static final int PORT = 20000 + ThreadLocalRandom.current().nextInt(20000);
    /** Upstream's node on sim (asked for: without an RDMA device init refuses otherwise). */
    static final String KEYS = "fabric=sim;discovery_interval_ms=100;parking_yield_after_ms=0";

    protected DXNet node0;
    protected DXNet node2;
    protected boolean upstreamUp;

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
    protected DXNet startNode0(BlockingQueue<byte[]> got) throws Exception {
        return startNode(0, "127.0.0.1", got);
    }

    /** Our node {@code id} on {@code ip} (upstream's port), answering BytesRequests and collecting BytesMessages. */
    static DXNet startNode(int id, String ip, BlockingQueue<byte[]> got) throws Exception {
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

    /**
     * Upstream's node 1 with {@code peer} as its handler, on 127.0.0.2 with the
     * engine keys {@code keys}, the connection limit {@code maxConnections}, told
     * the addresses {@code ipv4} (as upstream's {@code addNode}); returns once node 0
     * is discovered.
     */
    protected UpstreamPeer startUpstream(UpstreamPeer peer, String keys, int maxConnections, int... ipv4)
            throws InterruptedException {
        System.setProperty("ibdxnet.compat.listen", "127.0.0.2:" + PORT);
        System.setProperty("ibdxnet.compat.keys", keys);
        assertTrue("init", initUpstream(peer, RING, maxConnections));
        upstreamUp = true;
        for (int a : ipv4) {
            MsgrcJNIBinding.addNode(a);
        }
        expectEvent(peer, "discovered 0");
        return peer;
    }

    /** {@link #startUpstream} with the test keys, upstream's limit, and node 0's address (127.0.0.1). */
    protected UpstreamPeer startUpstream(UpstreamPeer peer) throws InterruptedException {
        return startUpstream(peer, KEYS, 100, 0x7F000001);
    }

    /** Upstream's init as IBConnectionManager calls it, with small sizes. */
    static boolean initUpstream(UpstreamPeer peer, int ringSize) {
        return initUpstream(peer, ringSize, 100);
    }

    static boolean initUpstream(UpstreamPeer peer, int ringSize, int maxConnections) {
        return MsgrcJNIBinding.init(peer, false, false, 0, (short) 1, 5000, maxConnections, 20, 128, 2000, 2000,
                ringSize, 1024L * 32768, 32768, 4);
    }

    static void waitFor(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(10);
        }
    }

    static void expectEvent(UpstreamPeer peer, String event) throws InterruptedException {
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
    static void expectNext(UpstreamPeer peer, String event) throws InterruptedException {
        String e = peer.events.poll(20, TimeUnit.SECONDS);
        assertEquals("the next event", event, e);
    }

    static UpstreamPeer.Received nextFrame(UpstreamPeer peer) throws InterruptedException {
        UpstreamPeer.Received r = peer.frames.poll(20, TimeUnit.SECONDS);
        if (r == null) {
            throw new AssertionError("no frame arrived (failures: " + peer.failures + ")");
        }
        return r;
    }

    /** createConnection then getSendBufferAddress, as upstream's createConnection does. */
    static long connect(UpstreamPeer peer, int node) {
        assertEquals("createConnection", 0, MsgrcJNIBinding.createConnection((short) node));
        long ring = MsgrcJNIBinding.getSendBufferAddress((short) node);
        assertNotEquals("getSendBufferAddress", -1L, ring);
        peer.connect(node, ring);
        return ring;
    }

    protected void exchange(UpstreamPeer peer, BlockingQueue<byte[]> got, String tag) throws Exception {
        exchange(peer, node0, 0, got, tag);
    }

    static void exchange(UpstreamPeer peer, DXNet ours, int oursId, BlockingQueue<byte[]> got, String tag)
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
}
