package io.ibdxnet;

import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesMessage;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * {@code close()} called inside one of the node's own message handlers
 * completes without waiting for that handler (issue 21, bug 3: it waited
 * {@code requestTimeoutMs}, 10 s, for itself); one that finds a handler still
 * blocked after {@code requestTimeoutMs} says so.
 */
public class CloseFromHandlerTest extends EveryTransport {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    @Test
    public void closeInsideAHandlerReturnsAtOnce() throws Exception {
        List<DXNet> mesh = mesh(2, c -> c.requestTimeoutMs = 10_000);
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

    @Test
    public void closeWhileAHandlerStaysBlockedSaysSoWithTheCount() throws Exception {
        List<DXNet> mesh = mesh(2, c -> c.requestTimeoutMs = 300);
        DXNet receiver = mesh.get(1);
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        receiver.register(BytesMessage.TYPE.type(), BytesMessage.TYPE.subtype(), m -> {
            entered.countDown();
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        receiver.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        mesh.get(0).registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        LogCapture log = new LogCapture();
        java.util.logging.Logger logger = java.util.logging.Logger.getLogger(DXNet.class.getName());
        logger.addHandler(log);
        try {
            mesh.get(0).sendMessage(new BytesMessage(1, new byte[16]));
            assertTrue("the handler ran", entered.await(30, TimeUnit.SECONDS));
            long t0 = System.nanoTime();
            receiver.close();
            long ms = (System.nanoTime() - t0) / 1_000_000;
            java.util.logging.LogRecord r = log.find("message handler task(s) unfinished");
            assertTrue("no warning that a handler was still running; close() took " + ms + " ms", r != null);
            System.out.println("CloseFromHandlerTest " + transport + ": " + r.getMessage());
            assertTrue(r.getMessage(), r.getMessage().contains("closing with 1 message handler task(s)")
                    && r.getMessage().contains("after 300 ms"));
        } finally {
            logger.removeHandler(log);
            release.countDown();
        }
    }
}
