package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.After;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Two DXNet nodes on real verbs (Soft-RoCE in CI's VM). Skipped without an
 * RDMA device, unless IBDXNET_REQUIRE_RDMA=1.
 */
public class VerbsDXNetTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(20);

    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    private DXNet node(int id) throws NetworkException {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = "ib";
        c.nativeConfig.put("fabric", "verbs");
        c.nativeConfig.put("listen", "127.0.0.1:0");
        c.nativeConfig.put("srq_size", "128");
        c.nativeConfig.put("recv_buffer_count", "1024");
        c.nativeConfig.put("send_ring_size", Integer.toString(1 << 20));
        c.nativeConfig.put("parking_yield_after_ms", "0");
        c.handlerThreads = 1;
        c.flowControlWindow = 1 << 20;
        // CI runs this in a VM whose two CPUs are emulated by one host thread:
        // a receiving JVM can stall for seconds (JIT, GC) without anything wrong.
        c.sendTimeoutMs = 120_000;
        DXNet n = DXNet.start(c);
        n.registerMessageType(DataMessage.TYPE, DataMessage.DATA, DataMessage.class);
        n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        nodes.add(n);
        return n;
    }

    @Test
    public void messagesAndRequestsOverVerbs() throws Exception {
        DXNet a;
        try {
            a = node(0);
        } catch (IllegalArgumentException e) {
            // No device is a configuration error naming fabric and device.
            boolean required = "1".equals(System.getenv("IBDXNET_REQUIRE_RDMA"));
            if (required || !e.getMessage().contains("no RDMA device")) {
                throw e;
            }
            Assume.assumeTrue("no RDMA device: " + e.getMessage(), false);
            return;
        }
        DXNet b = node(1);
        a.addNode(1, "127.0.0.1:" + b.localPort());
        b.addNode(0, "127.0.0.1:" + a.localPort());
        AtomicLong received = new AtomicLong();
        int[] next = {0};
        b.register(DataMessage.TYPE, DataMessage.DATA, m -> {
            DataMessage d = (DataMessage) m;
            if (d.seq == next[0] && d.intact()) {
                next[0]++;
            }
            received.incrementAndGet();
        });
        b.register(BytesRequest.class, req -> b.reply(req, BytesResponse.echo(req)));
        int count = 2000;
        for (int s = 0; s < count; s++) {
            try {
                a.sendMessage(new DataMessage(1, 0, s, s % 100 == 0 ? 300_000 : 200));
            } catch (NetworkException e) {
                throw new AssertionError("message " + s + ": received " + received.get() + ", sender "
                        + a.transportStats() + ", receiver " + b.transportStats(), e);
            }
        }
        long end = System.nanoTime() + 120_000_000_000L;
        while (received.get() < count && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(count, received.get());
        assertEquals("in order and intact", count, next[0]);
        for (int i = 0; i < 100; i++) {
            long[] v = {i, -i};
            BytesResponse r = a.sendSync(new BytesRequest(1, bytesOf(v)), 30_000);
            assertArrayEquals(v, longsOf(r.bytes));
        }
        if (!a.fabricName().startsWith("rxe") && !a.fabricName().startsWith("mlx")) {
            fail("expected a verbs device, got " + a.fabricName());
        }
    }
}
