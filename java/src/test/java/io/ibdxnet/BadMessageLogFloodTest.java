package io.ibdxnet;

import static org.junit.Assert.assertTrue;

import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * One node floods another with messages of a type the receiver never
 * registered and with messages whose payload lies about its length: the
 * receiver logs at most about one line a second of each kind about that
 * node, without stack traces (the peer caused them), and counts the rest.
 * The sender, told of the drops and without a loss listener, logs about one
 * line a second as well.
 */
public class BadMessageLogFloodTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    /** A message of a type node 1 does not register. */
    public static final class Unregistered extends Message {
        public Unregistered() {
            super((byte) 9, (byte) 2);
        }

        Unregistered(int dest) {
            super(dest, (byte) 9, (byte) 2);
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeInt(1);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            in.readInt();
        }
    }

    @Test
    public void aFloodOfBadMessagesLogsALineASecondPerKind() throws Exception {
        Logger logger = Logger.getLogger(DXNet.class.getName());
        LogFloodTest.Counting h = new LogFloodTest.Counting();
        boolean parents = logger.getUseParentHandlers();
        logger.setUseParentHandlers(false);
        logger.addHandler(h);
        DXNet[] n = new DXNet[2];
        try {
            for (int i = 0; i < 2; i++) {
                DXNetConfig c = new DXNetConfig(i);
                c.transport = "loopback";
                n[i] = DXNet.start(c);
                n[i].registerMessageType((byte) 9, (byte) 1, MessageImporterTest.Liar.class);
                n[i].register((byte) 9, (byte) 1, m -> {
                    throw new AssertionError("a lying message was delivered");
                });
            }
            n[0].registerMessageType((byte) 9, (byte) 2, Unregistered.class);
            n[0].addNode(1, "127.0.0.1:" + n[1].localPort());
            n[1].addNode(0, "127.0.0.1:" + n[0].localPort());
            String env = System.getenv("LOG_FLOOD_SECONDS");
            long floodNanos = (env == null ? 2 : Long.parseLong(env)) * 1_000_000_000L;
            long sent = 0;
            long t0 = System.nanoTime();
            while (System.nanoTime() - t0 < floodNanos) {
                for (int i = 0; i < 100; i++) {
                    n[0].sendMessage(new Unregistered(1));
                    n[0].sendMessage(new MessageImporterTest.Liar(1));
                }
                sent += 200;
            }
            long total = sent;
            TestSupport.waitFor("all dropped", 120_000, () -> n[1].droppedMessages() == total);
            double seconds = (System.nanoTime() - t0) / 1e9;
            int traces = 0;
            for (LogRecord r : h.records) {
                traces += r.getThrown() != null ? 1 : 0;
            }
            System.out.printf("BadMessageLogFloodTest: %d bad messages in %.2f s: %d log records (%d with a stack trace), %d bytes%n",
                    sent, seconds, h.records.size(), traces, h.bytes.get());
            long told = h.records.stream().filter(r -> r.getMessage().startsWith("node 0: messages sent to node 1 may be lost")).count();
            assertTrue(told + " lines of the sender about the drops reported to it in " + seconds + " s",
                    told >= 1 && told <= 2 + (int) seconds);
            assertTrue(h.records.size() + " records in " + seconds + " s", h.records.size() - told <= 2 * (2 + (int) seconds));
            assertTrue(traces + " stack traces for what a peer sent", traces == 0);
            assertTrue(h.records.get(h.records.size() - 1).getLevel().intValue() >= Level.WARNING.intValue());
        } finally {
            logger.removeHandler(h);
            logger.setUseParentHandlers(parents);
            for (DXNet d : n) {
                if (d != null) {
                    d.close();
                }
            }
        }
    }
}
