package io.ibdxnet;

import static io.ibdxnet.TestSupport.assertHoldsFor;
import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.After;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;

/**
 * When received bytes are confirmed to their sender: once the handlers of
 * the messages they carried returned, not when they were parsed. Bytes
 * queued for a handler thus stay unconfirmed, and a receiver that goes away
 * with them unhandled makes its sender report them as a possible loss.
 * Before, the core confirmed a buffer as soon as it had parsed it, and the
 * first two tests fail: the sender's unconfirmed bytes fell below one unit
 * while every handler was still held, and the close reported less than one
 * unit. The third guards what must not wait for a handler: the parts of a
 * message larger than the window.
 */
@RunWith(Parameterized.class)
public class ConfirmAfterHandlingTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return new Object[] {"ib", "nio", "loopback"};
    }

    @Parameterized.Parameter
    public String transport;

    private static final int MESSAGES = 200;
    private static final int SIZE = 1024;
    /** The sender's window and threshold: a unit of 64 KiB, the 200 KiB sent are three of them. */
    private static final long WINDOW = 1 << 20;
    private static final double THRESHOLD = 1.0 / 16;
    private static final long UNIT = (long) (WINDOW * THRESHOLD);

    private final List<DXNet> nodes = new ArrayList<>();
    private final CountDownLatch release = new CountDownLatch(1);

    @After
    public void closeAll() {
        release.countDown();
        for (DXNet n : nodes) {
            n.close();
        }
    }

    private List<DXNet> start(int requestTimeoutMs) throws Exception {
        List<DXNet> n = TestSupport.mesh(transport, 2, c -> {
            c.handlerThreads = 1;
            c.flowControlWindow = WINDOW;
            c.flowControlThreshold = THRESHOLD;
            c.requestTimeoutMs = requestTimeoutMs;
        }, nodes);
        for (DXNet d : n) {
            d.registerMessageType(DataMessage.TYPE, DataMessage.DATA, DataMessage.class);
        }
        return n;
    }

    /** Node 1's handler holds the first message until released; counts what it handled. */
    private AtomicLong holdingReceiver(DXNet receiver) {
        AtomicLong handled = new AtomicLong();
        receiver.register(DataMessage.TYPE, DataMessage.DATA, m -> {
            try {
                release.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            handled.incrementAndGet();
        });
        return handled;
    }

    private static long unconfirmed(DXNet sender) {
        return sender.transportStats().get("unconfirmed_bytes");
    }

    @Test
    public void bytesAreConfirmedOnlyOnceTheirHandlersReturned() throws Exception {
        List<DXNet> n = start(10_000);
        AtomicLong handled = holdingReceiver(n.get(1));
        for (int s = 0; s < MESSAGES; s++) {
            n.get(0).sendMessage(new DataMessage(1, 0, s, SIZE));
        }
        long sent = (long) MESSAGES * SIZE;
        // Everything reaches node 1 and is parsed (the handler share, 8 MiB, holds it all), none is handled.
        waitFor("node 1 parsed what was sent", () -> n.get(1).incomingBuffersQueued() == 0 && n.get(1).handlerBatchesQueued() > 0);
        assertHoldsFor(transport + ": nothing handled, so nothing confirmed (the sender's unconfirmed bytes "
                + unconfirmed(n.get(0)) + ", sent " + sent + ")", 500, () -> unconfirmed(n.get(0)) >= sent);
        assertTrue(handled.get() == 0);
        release.countDown();
        waitFor("every message handled", () -> handled.get() == MESSAGES);
        waitFor(transport + ": the handled bytes confirmed, up to less than one unit (" + unconfirmed(n.get(0)) + ")",
                () -> unconfirmed(n.get(0)) < UNIT);
    }

    @Test
    public void aReceiverClosedWithItsHandlersBusyMakesItsSenderReportTheBacklog() throws Exception {
        Assume.assumeFalse("loopback has no connections to fail", transport.equals("loopback"));
        // The close waits this long for the handlers, then goes without telling what they handled.
        List<DXNet> n = start(300);
        holdingReceiver(n.get(1));
        CopyOnWriteArrayList<Long> lost = new CopyOnWriteArrayList<>();
        n.get(0).setLossListener((node, bytes, reason) -> lost.add(bytes));
        for (int s = 0; s < MESSAGES; s++) {
            n.get(0).sendMessage(new DataMessage(1, 0, s, SIZE));
        }
        long sent = (long) MESSAGES * SIZE;
        waitFor("node 1 parsed what was sent", () -> n.get(1).incomingBuffersQueued() == 0 && n.get(1).handlerBatchesQueued() > 0);
        Thread.sleep(100); // the sender has had time to hear any confirmation
        n.get(1).close(); // its handler is still held
        waitFor("a possible-loss event at node 0", () -> !lost.isEmpty());
        long reported = lost.stream().mapToLong(Long::longValue).sum();
        assertTrue(transport + ": the unhandled backlog (" + sent + " bytes of payload) is reported, not " + reported,
                reported >= sent);
    }

    /**
     * A message larger than the window: the buffers that carry only a part of
     * it are confirmed once parsed, or its sender would wait for a window its
     * own rest must free first. Only the bytes of the buffer it completed in
     * wait for its handler.
     */
    @Test
    public void aMessageLargerThanTheWindowReachesItsHeldHandler() throws Exception {
        List<DXNet> n = start(10_000);
        AtomicLong handled = holdingReceiver(n.get(1));
        int size = (int) (3 * WINDOW);
        n.get(0).sendMessage(new DataMessage(1, 0, 0, size)); // returns once the last frame is in the ring
        waitFor("node 1 parsed it", () -> n.get(1).incomingBuffersQueued() == 0 && n.get(1).handlerBatchesQueued() > 0);
        assertHoldsFor(transport + ": its handler is held; the last part stays unconfirmed, the rest does not", 300, () -> {
            long u = unconfirmed(n.get(0));
            return u > 0 && u <= WINDOW;
        });
        release.countDown();
        waitFor("handled", () -> handled.get() == 1);
        waitFor(transport + ": confirmed once handled", () -> unconfirmed(n.get(0)) < UNIT);
    }
}
