package io.ibdxnet;

import static io.ibdxnet.DataMessage.DATA;
import static io.ibdxnet.DataMessage.TYPE;
import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The messaging suite's flow control, over every transport: a slow handler
 * holds the sender back, a message larger than the window is not stuck
 * behind a small one, a message that finds the window full waits out its
 * send timeout, and a bad flow-control setting is refused by name.
 */
public class DXNetFlowControlTest extends DXNetSuite {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    /**
     * A slow receiver: full handler queue → the coordinator waits → the
     * incoming buffer queue fills → the transport stops reading → the flow
     * control window fills → the sender waits. Nothing is lost.
     */
    @Test
    public void slowHandlerIsThrottledByFlowControl() throws Exception {
        List<DXNet> n = start(2, "100", c -> {
            c.handlerQueueSize = 4;
            c.ibqMaxBuffers = 4;
        });
        AtomicLong received = new AtomicLong();
        n.get(1).register(TYPE, DATA, m -> {
            received.incrementAndGet();
            java.util.concurrent.locks.LockSupport.parkNanos(200_000); // 0.2 ms per message
        });
        int count = 600;
        int size = 16 << 10; // 600 × 16 KiB = 9.4 MiB through a 1 MiB window
        long t0 = System.nanoTime();
        for (int s = 0; s < count; s++) {
            n.get(0).sendMessage(new DataMessage(1, 0, s, size));
        }
        long sendTime = System.nanoTime() - t0;
        waitFor("all messages", () -> received.get() == count);
        // Without flow control the sends would finish at memory speed; with it the
        // sender waited for confirmations from the slow side.
        assertTrue("sender was not held back: " + sendTime / 1_000_000 + " ms", sendTime > 40_000_000L);
    }

    /**
     * The receiver confirms whole units of the window only, so a small
     * message leaves up to a unit unconfirmed; frames as large as the whole
     * window then never fitted and a large message waited out its send
     * timeout ("flow control window ... stayed full"). Frames are now at most
     * the window less a unit.
     */
    @Test
    public void aMessageLargerThanTheWindowAfterASmallOneIsNotStuck() throws Exception {
        List<DXNet> n = start(2, "100", c -> {
            c.flowControlWindow = 64 << 10;
            c.sendTimeoutMs = 10_000;
            c.maxMessageSize = 1 << 20;
        });
        List<DataMessage> got = new java.util.concurrent.CopyOnWriteArrayList<>();
        n.get(1).register(TYPE, DATA, m -> got.add((DataMessage) m));
        DataMessage large = new DataMessage(1, 0, 1, 200 << 10);
        long t0 = System.nanoTime();
        n.get(0).sendMessage(new DataMessage(1, 0, 0, 100));
        n.get(0).sendMessage(large);
        waitFor("both messages handled", 10_000, () -> got.size() == 2);
        assertTrue("the large message arrived changed", java.util.Arrays.equals(large.payload, got.get(1).payload));
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertTrue("took " + ms + " ms: a frame waited for window space", ms < 5_000);
        assertTrue(n.get(0).maxFrameSize() <= (64 << 10) - (64 << 10) / 10);
    }

    /**
     * A message that finds the window full takes the waiting path (a send
     * with room goes out without one, and without a deadline): it waits its
     * send timeout and fails with TIMEOUT, not at once; the messages before
     * it went out. The receiver's only handler is held until the end.
     */
    @Test
    public void aMessageThatFindsTheWindowFullWaitsOutItsSendTimeout() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        List<DXNet> n = start(2, "100", c -> {
            c.flowControlWindow = 64 << 10;
            c.sendTimeoutMs = 600;
            c.handlerQueueSize = 4;
            c.ibqMaxBuffers = 4;
        });
        n.get(1).register(TYPE, DATA, m -> {
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        try {
            int sent = 0;
            long failedAfterMs = -1;
            FailureReason reason = null;
            while (reason == null && sent < 10_000) { // 10 MB: far beyond the window
                long t0 = System.nanoTime();
                try {
                    n.get(0).sendMessage(new DataMessage(1, 0, sent, 1024).declare(0)); // in place: the path without a wait
                    sent++;
                } catch (NetworkException e) {
                    reason = e.reason();
                    failedAfterMs = (System.nanoTime() - t0) / 1_000_000;
                }
            }
            assertEquals("after " + sent + " messages", FailureReason.TIMEOUT, reason);
            assertTrue("failed after " + failedAfterMs + " ms: it did not wait its send timeout (600 ms)", failedAfterMs >= 550);
            assertTrue("only " + sent + " messages went out before the window was full", sent >= 16);
        } finally {
            release.countDown();
        }
    }

    @Test
    public void badConfigurationNamesTheField() {
        DXNetConfig c = new DXNetConfig(1);
        c.flowControlThreshold = 2;
        try {
            DXNet.start(c).close();
            fail("accepted");
        } catch (IllegalArgumentException expected) {
            assertTrue(expected.getMessage().contains("flowControlThreshold"));
        } catch (NetworkException e) {
            fail(e.toString());
        }
    }
}
