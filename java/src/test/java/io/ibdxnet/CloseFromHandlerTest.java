package io.ibdxnet;

import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesMessage;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;

/**
 * {@code close()} called inside one of the node's own message handlers
 * completes without waiting for that handler (issue 21, bug 3: it waited
 * {@code requestTimeoutMs}, 10 s, for itself).
 */
@RunWith(Parameterized.class)
public class CloseFromHandlerTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return new Object[] {"loopback", "nio", "ib"};
    }

    @Parameterized.Parameter
    public String transport;

    private final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    @Test
    public void closeInsideAHandlerReturnsAtOnce() throws Exception {
        List<DXNet> mesh = TestSupport.mesh(transport, 2, c -> c.requestTimeoutMs = 10_000, nodes);
        DXNet receiver = mesh.get(1);
        AtomicLong closeNanos = new AtomicLong(-1);
        CountDownLatch closed = new CountDownLatch(1);
        receiver.register(BytesMessage.TYPE.type(), BytesMessage.TYPE.subtype(), m -> {
            long t0 = System.nanoTime();
            receiver.close();
            closeNanos.set(System.nanoTime() - t0);
            closed.countDown();
        });
        receiver.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        mesh.get(0).registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        mesh.get(0).sendMessage(new BytesMessage(1, new byte[16]));
        assertTrue("the handler ran and close() returned", closed.await(30, TimeUnit.SECONDS));
        long ms = closeNanos.get() / 1_000_000;
        System.out.println("CloseFromHandlerTest " + transport + ": close() inside a handler took " + ms + " ms");
        assertTrue("close() inside a handler took " + ms + " ms", ms < 2_000);
    }
}
