package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.core.Frame;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runners.Parameterized;

/**
 * A node is reachable as soon as its transport runs — peers of its
 * {@code DXNetConfig.nodes} even while {@code DXNet.start} runs — but with
 * the plain {@code start} its receivers can only be registered afterwards
 * (found by the cluster history checker, issue 29: in a 3-process
 * kill-and-restart run on nio 1 378 messages were dropped as "no receiver"
 * in the ~0.6 s between the restarted node's start and its
 * {@code register}, and their senders were told nothing). Now a plain
 * message dropped for its type is reported to its sender (a drop notice: its
 * {@code LossListener} hears the node and the bytes), and
 * {@code DXNet.start(config, beforeReceiving)} registers before anything
 * received is parsed, so nothing is dropped at all.
 */
public class ReceiverRegisteredLateTest extends EveryTransport {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    /** ib and nio: loopback has no network between start and registration. */
    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return new Object[] {"nio", "ib"};
    }

    /** Payload of each message: the array's length (4) and 16 bytes. */
    private static final int PAYLOAD = 4 + 16;

    @Test
    public void aMessageThatArrivesBeforeItsReceiverIsRegisteredIsHandledOrReported() throws Exception {
        List<DXNet> n = TestSupport.mesh(transport, 2, c -> {}, nodes);
        DXNet sender = n.get(0);
        DXNet late = n.get(1);
        AtomicLong reported = new AtomicLong();
        AtomicLong reportedBytes = new AtomicLong();
        List<String> reasons = new CopyOnWriteArrayList<>();
        sender.setLossListener((node, bytes, reason) -> {
            reported.incrementAndGet();
            reportedBytes.addAndGet(bytes);
            reasons.add(node + ": " + reason);
        });
        sender.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        for (int i = 0; i < 10; i++) {
            sender.sendMessage(new BytesMessage(1, new byte[16])); // returns: accepted
        }
        TestSupport.waitFor("the messages reached node 1", () -> late.droppedMessages() >= 10);
        AtomicLong handled = new AtomicLong();
        late.register(BytesMessage.class, m -> handled.incrementAndGet()); // the application was just slower
        TestSupport.waitFor("10 messages accepted: handled or reported", 10_000,
                () -> handled.get() + reportedBytes.get() / PAYLOAD == 10);
        Thread.sleep(300); // nothing more comes
        assertTrue("10 messages accepted: " + handled.get() + " handled, " + late.droppedMessages()
                + " dropped at the receiver, " + reported.get() + " possible-loss events at the sender for "
                + reportedBytes.get() + " bytes: " + reasons,
                handled.get() == 10 || reported.get() > 0 && reportedBytes.get() > 0);
        // All 10 were dropped (waited for above): all 10 reported.
        assertEquals(0, handled.get());
        assertEquals(10L * PAYLOAD, reportedBytes.get());
        for (String r : reasons) {
            assertTrue(r, r.startsWith("1: node 1 dropped") && r.endsWith("type 1/1 not registered"));
        }
        assertEquals(reported.get(), (long) late.transportStats().get("drop_notices_sent"));
        assertEquals(reported.get(), (long) sender.transportStats().get("drop_notices_received"));
        assertEquals(reported.get(), (long) sender.transportStats().get("possible_losses"));
        assertEquals("a notice is no dropped message at its receiver", 0, sender.droppedMessages());
    }

    /**
     * The messages reach the node while {@code beforeReceiving} runs and wait
     * there, unparsed, until it has registered their receiver: all handled,
     * none dropped. Fails if anything received is parsed before the hook
     * returns (inline on the receiving thread, or by the coordinator).
     */
    @Test
    public void aNodeStartedWithItsReceiversHandlesWhatArrivedWhileItStarted() throws Exception {
        AtomicLong handled = new AtomicLong();
        AtomicLong reported = new AtomicLong();
        List<DXNet> n = TestSupport.mesh(transport, 2, c -> {}, nodes, (id, node) -> {
            if (id != 1) {
                return;
            }
            DXNet sender = nodes.get(0);
            sender.setLossListener((peer, bytes, reason) -> reported.incrementAndGet());
            sender.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
            try {
                for (int i = 0; i < 10; i++) {
                    sender.sendMessage(new BytesMessage(1, new byte[16])); // node 1 is reachable: accepted
                }
                TestSupport.waitFor("the 10 messages at node 1", 20_000, () -> node.droppedMessages() > 0
                        || node.incomingBytesQueued() + node.incomingBytesBeyondShare() >= 10L * (Frame.HEADER + PAYLOAD));
                Thread.sleep(300); // time for a parse that should not happen
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            assertEquals("dropped before the receivers were registered", 0, node.droppedMessages());
            node.register(BytesMessage.class, m -> handled.incrementAndGet());
        });
        DXNet late = n.get(1);
        TestSupport.waitFor("10 handled", 10_000, () -> handled.get() == 10 || late.droppedMessages() > 0);
        Thread.sleep(300);
        assertEquals(10, handled.get());
        assertEquals(0, late.droppedMessages());
        assertEquals(0, reported.get());
        assertTrue(late.healthy());
    }

    /** A {@code beforeReceiving} that throws: the exception propagates, no thread and no port are left behind. */
    @Test
    public void aFailingBeforeReceivingLeavesNoThreadAndNoPortBehind() throws Exception {
        int port = TestPorts.freePort();
        Set<Thread> before = Thread.getAllStackTraces().keySet();
        DXNetConfig c = new DXNetConfig(0);
        c.transport = transport;
        TestSupport.smallSimNode(c);
        c.listen = "127.0.0.1:" + port;
        c.nativeConfig.put("listen", c.listen);
        RuntimeException thrown = new IllegalStateException("registration failed");
        AtomicLong ranOn = new AtomicLong(-1);
        try {
            DXNet.start(c, node -> {
                ranOn.set(node.localPort());
                node.register(BytesMessage.class, m -> { });
                throw thrown;
            }).close();
            fail("started although beforeReceiving threw");
        } catch (IllegalStateException e) {
            assertSame(thrown, e);
        }
        assertEquals("beforeReceiving ran with the transport up", port, ranOn.get());
        long deadline = System.nanoTime() + 10_000_000_000L;
        List<String> left;
        do {
            left = new ArrayList<>();
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                String name = t.getName();
                if (!before.contains(t) && t.isAlive() && (name.startsWith("dxnet") || name.startsWith("ibdxnet"))
                        && !name.equals("ibdxnet-native-log")) {
                    left.add(name);
                }
            }
            if (!left.isEmpty()) {
                Thread.sleep(10);
            }
        } while (!left.isEmpty() && System.nanoTime() < deadline);
        assertTrue("threads left behind: " + left, left.isEmpty());
        try (DXNet again = DXNet.start(c)) {
            assertEquals(port, again.localPort());
            assertTrue(again.healthy());
        }
    }

    /** The two {@code start(Path …, beforeReceiving)} forms run it on the node they return. */
    @Test
    public void theConfigurationFileFormsRunBeforeReceivingToo() throws Exception {
        java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("dxnet-before-receiving");
        java.nio.file.Path file = dir.resolve("node.conf");
        java.nio.file.Files.write(file, java.util.Arrays.asList("transport=" + transport, "listen=127.0.0.1:0",
                "native.fabric=sim", "native.listen=127.0.0.1:0", "native.parking_yield_after_ms=0"));
        try {
            List<DXNet> ran = new ArrayList<>();
            DXNet a = DXNet.start(file, ran::add);
            nodes.add(a);
            DXNet b = DXNet.start(file, 7, ran::add);
            nodes.add(b);
            assertEquals(2, ran.size());
            assertSame(a, ran.get(0));
            assertSame(b, ran.get(1));
            assertEquals(7, b.nodeId());
        } finally {
            java.nio.file.Files.delete(file);
            java.nio.file.Files.delete(dir);
        }
    }
}
