package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.junit.After;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * A plain message the receiver cannot hand to anyone — no receiver for its
 * type, its type not registered there, no message creatable from its
 * payload — is dropped there and its sender is told: a drop notice back to
 * the source node, whose {@code LossListener} hears the node, the payload
 * bytes and a reason naming the node and the type. At most one notice per
 * source every 100 ms. On every transport.
 */
public class DropNoticeTest extends EveryTransport {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    /** What node 0's loss listener heard. */
    private final List<String> reasons = new CopyOnWriteArrayList<>();
    private final AtomicLong events = new AtomicLong();
    private final AtomicLong bytes = new AtomicLong();
    private final Logger log = Logger.getLogger(DXNet.class.getName());
    private Level level;

    @Before
    public void quiet() {
        level = log.getLevel();
        log.setLevel(Level.SEVERE); // the receiver's rate-limited warnings about the drops are not the subject
    }

    @After
    public void restore() {
        log.setLevel(level);
    }

    private List<DXNet> pair() throws Exception {
        List<DXNet> n = mesh(2, c -> {});
        n.get(0).setLossListener((node, b, reason) -> {
            events.incrementAndGet();
            bytes.addAndGet(b);
            reasons.add(node + ": " + reason);
        });
        return n;
    }

    private void awaitReported(long payloadBytes) throws InterruptedException {
        TestSupport.waitFor(payloadBytes + " bytes reported, heard: " + reasons, 10_000, () -> bytes.get() >= payloadBytes);
        Thread.sleep(200); // and no more
        assertEquals(reasons.toString(), payloadBytes, bytes.get());
    }

    @Test
    public void aMessageWithoutReceiverIsReportedToItsSender() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        n.get(1).registerMessageType(BytesMessage.TYPE, BytesMessage.class); // the class, no receiver
        n.get(0).sendMessage(new BytesMessage(1, new byte[6]));
        awaitReported(10);
        assertEquals(1, events.get());
        assertEquals("1: node 1 dropped 1 message (10 payload bytes) it could not hand to a receiver: "
                + "no receiver for type 1/1", reasons.get(0));
        assertEquals(1, n.get(1).droppedMessages());
        assertEquals(0, n.get(0).droppedMessages());
        assertEquals(1L, (long) n.get(0).transportStats().get("possible_losses"));
        assertEquals(1L, (long) n.get(0).transportStats().get("drop_notices_received"));
        assertEquals(1L, (long) n.get(1).transportStats().get("drop_notices_sent"));
    }

    @Test
    public void aMessageOfAnUnregisteredTypeIsReportedToItsSender() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType((byte) 9, (byte) 2, BadMessageLogFloodTest.Unregistered.class);
        n.get(0).sendMessage(new BadMessageLogFloodTest.Unregistered(1));
        awaitReported(4);
        assertTrue(reasons.toString(), reasons.get(0).startsWith("1: node 1 dropped 1 message")
                && reasons.get(0).endsWith("type 9/2 not registered"));
    }

    @Test
    public void aReceiverWithoutItsClassIsNamedInTheReport() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        n.get(1).register(BytesMessage.TYPE, m -> { }); // the untyped register, no class
        n.get(0).sendMessage(new BytesMessage(1, new byte[1]));
        awaitReported(5);
        assertTrue(reasons.toString(), reasons.get(0).endsWith("a receiver but no class registered for type 1/1"));
    }

    @Test
    public void aMessageThatCannotBeCreatedFromItsPayloadIsReportedToItsSender() throws Exception {
        List<DXNet> n = pair();
        for (DXNet d : n) {
            d.registerMessageType((byte) 9, (byte) 1, MessageImporterTest.Liar.class);
            d.register((byte) 9, (byte) 1, m -> {
                throw new AssertionError("a lying message was delivered");
            });
        }
        n.get(0).sendMessage(new MessageImporterTest.Liar(1));
        awaitReported(4);
        assertTrue(reasons.toString(), reasons.get(0).contains("cannot create a message of type 9/1 from its payload"));
    }

    /** A request is refused with NoReceiverException, as before: no loss event besides. */
    @Test
    public void aRefusedRequestIsNoLossEvent() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        try {
            n.get(0).sendSync(new BytesRequest(1, new byte[] {1}), 10_000);
            fail("answered");
        } catch (NoReceiverException expected) {
            // told this way
        }
        Thread.sleep(300);
        assertEquals(reasons.toString(), 0, events.get());
        assertEquals(0L, (long) n.get(1).transportStats().get("drop_notices_sent"));
    }

    /** A request whose payload lies about its length: refused at once, naming why (it waited for its timeout). */
    @Test
    public void aRequestThatCannotBeCreatedFromItsPayloadFailsAtOnce() throws Exception {
        List<DXNet> n = pair();
        for (DXNet d : n) {
            d.registerMessageType((byte) 9, (byte) 3, LyingRequest.class);
            d.register((byte) 9, (byte) 3, m -> {
                throw new AssertionError("a lying request was delivered");
            });
        }
        long t0 = System.nanoTime();
        try {
            n.get(0).sendSync(new LyingRequest(1), 10_000);
            fail("answered");
        } catch (RemoteHandlerException expected) {
            assertTrue(expected.getMessage(), expected.getMessage().contains("cannot create request 9/3 at node 1 from its payload"));
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertTrue("failed after " + ms + " ms", ms < 5_000);
        Thread.sleep(300);
        assertEquals(reasons.toString(), 0, events.get()); // a request is answered, not reported as a loss
        assertEquals(1, n.get(1).droppedMessages());
    }

    /** A request whose payload claims 2 GiB more than it has. */
    public static final class LyingRequest extends Request<io.ibdxnet.app.BytesResponse> {
        public LyingRequest() {
            super(MessageType.of(9, 3));
        }

        LyingRequest(int dest) {
            super(dest, MessageType.of(9, 3));
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeInt(0x7FFFFFF0);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            in.readBytes(in.readInt());
        }
    }

    /** A message to the own node without a receiver: the node's own listener hears it. */
    @Test
    public void aMessageToTheOwnNodeWithoutReceiverIsReported() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        n.get(0).sendMessage(new BytesMessage(0, new byte[2]));
        awaitReported(6);
        assertTrue(reasons.toString(), reasons.get(0).startsWith("0: node 0 dropped 1 message (6 payload bytes)"));
        assertEquals(0L, (long) n.get(0).transportStats().get("drop_notices_sent"));
    }

    /**
     * A sender flooding a type nobody handles: every dropped byte is
     * reported, in at most one notice per 100 ms (plus the first).
     */
    @Test
    public void aFloodIsReportedInFewNotices() throws Exception {
        List<DXNet> n = pair();
        n.get(0).registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        long t0 = System.nanoTime();
        int sent = 0;
        while (System.nanoTime() - t0 < 1_000_000_000L) {
            for (int i = 0; i < 100; i++) {
                n.get(0).sendMessage(new BytesMessage(1, new byte[12]));
                sent++;
            }
        }
        int total = sent;
        TestSupport.waitFor("all dropped", 60_000, () -> n.get(1).droppedMessages() == total);
        double seconds = (System.nanoTime() - t0) / 1e9;
        awaitReported(16L * total);
        seconds += 0.2;
        System.out.printf("DropNoticeTest[%s]: %d messages dropped in %.2f s, reported in %d notices%n", transport, total,
                seconds, events.get());
        assertTrue(events.get() + " notices for " + total + " messages in " + seconds + " s",
                events.get() >= 2 && events.get() <= 2 + (long) (seconds * 10));
        assertEquals(events.get(), (long) n.get(1).transportStats().get("drop_notices_sent"));
    }

    /**
     * The notice needs the sender's address: on nio and ib a destination
     * accepts no connection from a node outside its table (the send fails,
     * the sender is told that way); loopback accepts one, drops the message,
     * and cannot address the notice: a warning at the destination, nothing
     * at the sender.
     */
    @Test
    public void aSenderMissingFromTheDestinationsTableIsToldOnlyWhereItCouldNotSend() throws Exception {
        List<DXNet> n = new java.util.ArrayList<>();
        for (int i = 0; i < 2; i++) {
            DXNetConfig c = new DXNetConfig(i);
            c.transport = transport;
            c.listen = "127.0.0.1:0";
            TestSupport.smallSimNode(c);
            c.connectTimeoutMs = 2_000;
            c.sendTimeoutMs = 2_000;
            DXNet d = DXNet.start(c);
            nodes.add(d);
            n.add(d);
        }
        n.get(0).addNode(1, "127.0.0.1:" + n.get(1).localPort()); // node 1 does not know node 0
        n.get(0).setLossListener((node, b, reason) -> reasons.add(node + ": " + reason));
        n.get(0).registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        LogFloodTest.Counting h = new LogFloodTest.Counting();
        log.setLevel(Level.WARNING);
        log.addHandler(h);
        try {
            n.get(0).sendMessage(new BytesMessage(1, new byte[1]));
            if (!transport.equals("loopback")) {
                fail("sent to a node that does not know the sender");
            }
            TestSupport.waitFor("dropped", 10_000, () -> n.get(1).droppedMessages() == 1);
            TestSupport.waitFor("the warning", 10_000, () -> h.records.stream()
                    .anyMatch(r -> r.getMessage().startsWith("node 1: could not tell node 0 that messages it sent were dropped")));
            Thread.sleep(200);
            assertEquals(0, reasons.size());
            assertEquals(0L, (long) n.get(1).transportStats().get("drop_notices_sent"));
        } catch (NetworkException e) {
            assertTrue(transport + ": " + e, !transport.equals("loopback"));
            assertEquals(0, n.get(1).droppedMessages());
        } finally {
            log.removeHandler(h);
        }
    }
}
