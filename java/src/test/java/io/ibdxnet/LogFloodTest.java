package io.ibdxnet;

import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * A peer's flood of requests that each cause a log line (here: our handler's
 * reply is invalid, a stack trace each) leaves at most one line per second
 * of that kind about that peer, and the next line says how many were
 * suppressed. The log's bytes are counted as the JUL SimpleFormatter writes them.
 */
public class LogFloodTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    /** Log records and formatted bytes of one logger, at WARNING and above. */
    static final class Counting extends Handler {
        final List<LogRecord> records = new CopyOnWriteArrayList<>();
        final AtomicLong bytes = new AtomicLong();
        private final SimpleFormatter format = new SimpleFormatter();

        @Override
        public void publish(LogRecord r) {
            if (r.getLevel().intValue() >= Level.WARNING.intValue()) {
                records.add(r);
                bytes.addAndGet(format.format(r).length());
            }
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
    }

    /** The untyped register without the class: the drop is counted and its warning says what is missing. */
    @Test
    public void aMessageWithAReceiverButNoClassIsDroppedWithAHint() throws Exception {
        Logger logger = Logger.getLogger(DXNet.class.getName());
        Counting h = new Counting();
        logger.addHandler(h);
        DXNet[] n = new DXNet[2];
        try {
            for (int i = 0; i < 2; i++) {
                DXNetConfig c = new DXNetConfig(i);
                c.transport = "loopback";
                n[i] = DXNet.start(c);
            }
            n[0].addNode(1, "127.0.0.1:" + n[1].localPort());
            n[0].registerMessageType(io.ibdxnet.app.BytesMessage.TYPE, io.ibdxnet.app.BytesMessage.class);
            n[1].register(io.ibdxnet.app.BytesMessage.TYPE, m -> { }); // no class registered at node 1
            n[0].sendMessage(new io.ibdxnet.app.BytesMessage(1, new byte[4]));
            TestSupport.waitFor("the drop is counted", () -> n[1].droppedMessages() == 1);
            TestSupport.waitFor("the warning", () -> h.records.stream().anyMatch(r -> r.getMessage().contains("registerMessageType(1, 1")));
        } finally {
            logger.removeHandler(h);
            for (DXNet d : n) {
                if (d != null) {
                    d.close();
                }
            }
        }
    }

    @Test
    public void aFloodOfInvalidRepliesLogsALineASecondWithTheCount() throws Exception {
        Logger logger = Logger.getLogger(DXNet.class.getName());
        Counting h = new Counting();
        boolean parents = logger.getUseParentHandlers();
        logger.setUseParentHandlers(false); // 2 000 stack traces on the console are not the point
        logger.addHandler(h);
        DXNet[] n = new DXNet[2];
        try {
            for (int i = 0; i < 2; i++) {
                DXNetConfig c = new DXNetConfig(i);
                c.transport = "loopback";
                c.maxMessageSize = 1024;
                c.maxUnfinishedBytesPerConnection = 1024;
                c.maxUnfinishedBytes = 1024;
                n[i] = DXNet.start(c);
                DXNet self = n[i];
                // The reply is larger than maxMessageSize: invalid, logged and answered with an error.
                self.register(BytesRequest.class, r -> self.reply(r, new BytesResponse(r, new byte[2048])));
                self.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
            }
            n[0].addNode(1, "127.0.0.1:" + n[1].localPort());
            n[1].addNode(0, "127.0.0.1:" + n[0].localPort());
            // 2 000 requests; LOG_FLOOD_SECONDS=60 in the environment floods for a minute (the bench figure).
            String env = System.getenv("LOG_FLOOD_SECONDS");
            long floodNanos = env == null ? 0 : Long.parseLong(env) * 1_000_000_000L;
            int flood = 0;
            long t0 = System.nanoTime();
            while (flood < 2_000 || System.nanoTime() - t0 < floodNanos) {
                failsRemotely(n[0]);
                flood++;
            }
            double seconds = (System.nanoTime() - t0) / 1e9;
            int lines = h.records.size();
            long bytes = h.bytes.get();
            System.out.printf("LogFloodTest: %d invalid replies in %.2f s: %d log records, %d bytes (%.0f bytes per minute)%n",
                    flood, seconds, lines, bytes, bytes / seconds * 60);
            assertTrue(lines + " records for " + flood + " invalid replies in " + seconds + " s",
                    lines >= 1 && lines <= 2 + (int) seconds);
            Thread.sleep(1_100);
            failsRemotely(n[0]);
            assertTrue("no line after a quiet second", h.records.size() == lines + 1);
            long suppressed = 0;
            for (LogRecord r : h.records.subList(1, h.records.size())) {
                String m = r.getMessage();
                assertTrue(m, m.matches("node 1: the reply to request \\d+ of node 0 is invalid \\(\\d+ similar warnings suppressed\\)"));
                suppressed += Long.parseLong(m.substring(m.lastIndexOf('(') + 1, m.indexOf(" similar")));
            }
            assertTrue("each line that passed carries its stack trace", h.records.get(lines).getThrown() != null);
            assertTrue("every invalid reply is logged or counted: " + suppressed + " + " + h.records.size(),
                    suppressed + h.records.size() == flood + 1);
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

    private static void failsRemotely(DXNet from) throws Exception {
        try {
            from.sendAsync(new BytesRequest(1, new byte[8]), 10_000).get();
            fail("an invalid reply arrived");
        } catch (ExecutionException e) {
            assertTrue(String.valueOf(e.getCause()), e.getCause() instanceof RemoteHandlerException);
        }
    }
}
