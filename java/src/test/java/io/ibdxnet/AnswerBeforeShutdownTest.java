package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * A node that answers a request and then shuts down in order: the answer
 * was sent before the shutdown, so the requester gets it, never "node N
 * disconnected" (the shutdown's notice on the requester's own connection to
 * that node could overtake the answer still in flight on the other one, or
 * still queued to be parsed).
 */
public class AnswerBeforeShutdownTest extends EveryTransport {
    @Rule
    public final Timeout timeout = TestSupport.minutes(4);

    static final int ROUNDS = 20;

    @Test
    public void anAnswerSentBeforeAnOrderlyShutdownArrives() throws Exception {
        List<String> failed = new ArrayList<>();
        for (int round = 0; round < ROUNDS; round++) {
            List<DXNet> mesh = mesh(2, c -> c.requestTimeoutMs = 10_000);
            DXNet asker = mesh.get(0);
            DXNet answerer = mesh.get(1);
            CountDownLatch answered = new CountDownLatch(1);
            for (DXNet n : mesh) {
                n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
                n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
            }
            answerer.register(BytesRequest.TYPE, m -> {
                try {
                    answerer.sendMessage(BytesResponse.echo((BytesRequest) m));
                } catch (NetworkException e) {
                    throw new IllegalStateException(e);
                }
                if (((BytesRequest) m).bytes[0] == 1) {
                    answered.countDown(); // the second request (the first, all zeros, only connects)
                }
            });
            // Connected both ways first, as a long-running pair would be.
            asker.sendSync(new BytesRequest(1, new byte[8]), 10_000);
            Thread closer = new Thread(() -> {
                try {
                    answered.await();
                } catch (InterruptedException e) {
                    return;
                }
                answerer.close(); // orderly: the answer leaves first
            });
            closer.start();
            try {
                BytesResponse r = asker.sendSync(new BytesRequest(1, new byte[] {1, 2, 3, 4, 5, 6, 7, 8}), 10_000);
                assertEquals(8, r.bytes.length);
            } catch (NetworkException e) {
                Thread.sleep(100);
                failed.add("round " + round + ": " + e.getMessage() + " (asker: " + asker.transportStats() + ")");
            }
            assertTrue("the answerer answered", answered.await(10, TimeUnit.SECONDS));
            closer.join(30_000);
            for (DXNet n : mesh) {
                n.close();
            }
            nodes.clear();
        }
        System.out.println("AnswerBeforeShutdownTest " + transport + ": " + failed.size() + " of " + ROUNDS
                + " answers lost: " + failed);
        assertEquals("answers sent before an orderly shutdown, lost: " + failed, 0, failed.size());
    }
}
