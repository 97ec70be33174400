package io.ibdxnet;

import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesMessage;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.Ignore;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runners.Parameterized;

/**
 * A loss the library does not report (found by the cluster history checker,
 * issue 29): a node is reachable as soon as {@code DXNet.start} returns —
 * peers of its {@code DXNetConfig.nodes} even while it starts — but its
 * receivers can only be registered afterwards. A message that arrives in
 * between (a restarted node whose peers are already sending to it) is
 * confirmed and dropped as "no receiver" ({@code droppedMessages()}, a
 * warning on the receiving node), while its sender's {@code sendMessage}
 * returned and no possible-loss event comes: RELIABILITY.md's "handled
 * exactly once … or you are told" does not hold. (A request in that window
 * fails with {@code NO_RECEIVER}: told.) In the 3-process kill-and-restart
 * run on nio 1 378 messages were lost this way in the ~0.6 s between the
 * restarted node's start and its {@code register}.
 *
 * <p>What a user needs: register before the node can receive (a start that
 * takes the registrations, or a node that is started in two steps), or the
 * sender told. Ignored until the API offers one; the workload works around
 * it by starting with an empty node table and adding its peers after
 * registering ({@code HistoryNode}, {@code --table-at-start false}).
 */
@Ignore("known gap, see the class comment: a message that arrives before its receiver is registered is lost unreported")
public class ReceiverRegisteredLateTest extends EveryTransport {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    /** ib and nio: loopback has no network between start and registration. */
    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return new Object[] {"nio", "ib"};
    }

    @Test
    public void aMessageThatArrivesBeforeItsReceiverIsRegisteredIsHandledOrReported() throws Exception {
        List<DXNet> n = TestSupport.mesh(transport, 2, c -> {}, nodes);
        DXNet sender = n.get(0);
        DXNet late = n.get(1);
        AtomicLong reported = new AtomicLong();
        sender.setLossListener((node, bytes, reason) -> reported.incrementAndGet());
        sender.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        for (int i = 0; i < 10; i++) {
            sender.sendMessage(new BytesMessage(1, new byte[16])); // returns: accepted
        }
        TestSupport.waitFor("the messages reached node 1", () -> late.droppedMessages() >= 10);
        AtomicLong handled = new AtomicLong();
        late.register(BytesMessage.class, m -> handled.incrementAndGet()); // the application was just slower
        Thread.sleep(1_000);
        assertTrue("10 messages accepted: " + handled.get() + " handled, " + late.droppedMessages()
                + " dropped at the receiver, " + reported.get() + " possible-loss events at the sender",
                handled.get() == 10 || reported.get() > 0);
    }
}
