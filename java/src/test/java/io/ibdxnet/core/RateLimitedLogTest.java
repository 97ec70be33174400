package io.ibdxnet.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.LogCapture;
import io.ibdxnet.TestSupport;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** Lines per (kind, node) at most once per interval, the count of those suppressed in the next one, traces only there. */
public class RateLimitedLogTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    private final Logger logger = Logger.getLogger("io.ibdxnet.test.RateLimitedLogTest");
    private final AtomicLong now = new AtomicLong(1_000_000_000L);
    private final RateLimitedLog log = new RateLimitedLog(logger, 1_000, now::get);
    private final LogCapture handler = new LogCapture();
    private final List<LogRecord> records = handler.records;

    {
        logger.setUseParentHandlers(false);
        logger.addHandler(handler);
    }

    @After
    public void removeHandler() {
        logger.removeHandler(handler);
    }

    /** 100 000 lines of one kind from one node over 10 s of the clock: one a second, each next one counting the rest. */
    @Test
    public void aFloodOfOneKindFromOneNodeIsOneLineASecondWithTheCount() {
        for (int i = 0; i < 100_000; i++) {
            log.warn("bad message", 3, "node 0: bad message " + i + " from node 3");
            now.addAndGet(100_000); // 0.1 ms: 10 s in all
        }
        assertEquals(10, records.size());
        assertEquals("node 0: bad message 0 from node 3", records.get(0).getMessage());
        assertEquals("node 0: bad message 10000 from node 3 (9999 similar warnings suppressed)", records.get(1).getMessage());
        long suppressed = 0;
        for (LogRecord r : records.subList(1, records.size())) {
            String m = r.getMessage();
            suppressed += Long.parseLong(m.substring(m.lastIndexOf('(') + 1, m.indexOf(" similar")));
            assertEquals(Level.WARNING, r.getLevel());
        }
        // Every line that did not pass is counted in the next that did; the last second's wait for the next one.
        assertEquals(100_000 - 10 - 9_999, suppressed);
    }

    /** Kinds and nodes are limited apart: a flood of one kind hides neither another kind nor another node. */
    @Test
    public void kindsAndNodesAreLimitedApart() {
        for (int i = 0; i < 1_000; i++) {
            log.warn("bad message", 3, "a");
        }
        log.warn("connection failed", 3, "b");
        log.warn("bad message", 4, "c");
        log.warn(3, "d"); // the old API: its own kind
        assertEquals(4, records.size());
        assertEquals("b", records.get(1).getMessage());
        assertEquals("c", records.get(2).getMessage());
        assertEquals("d", records.get(3).getMessage());
    }

    /** A throwable goes only on a line that passes: its stack trace with log(), only its toString with caused(). */
    @Test
    public void aThrowableOnlyOnTheLineThatPasses() {
        IllegalStateException e = new IllegalStateException("payload too short");
        for (int i = 0; i < 100; i++) {
            assertEquals(i == 0, log.log(Level.SEVERE, "receiver failed", 5, "receiver failed", e));
            assertEquals(i == 0, log.caused(Level.WARNING, "bad payload", 5, "cannot create message 1/2 from 5", e));
        }
        assertEquals(2, records.size());
        assertTrue(records.get(0).getThrown() == e);
        assertEquals(Level.SEVERE, records.get(0).getLevel());
        assertNull("no stack trace for what a peer caused", records.get(1).getThrown());
        assertEquals("cannot create message 1/2 from 5: java.lang.IllegalStateException: payload too short",
                records.get(1).getMessage());
        now.addAndGet(1_000_000_000L);
        log.log(Level.SEVERE, "receiver failed", 5, "receiver failed", e);
        assertEquals("receiver failed (99 similar errors suppressed)", records.get(2).getMessage());
    }

    /** A level the logger does not log costs no entry and is not counted. */
    @Test
    public void aLevelNotLoggedIsNotCounted() {
        logger.setLevel(Level.SEVERE);
        try {
            for (int i = 0; i < 10; i++) {
                assertTrue(!log.log(Level.WARNING, "k", 1, "w", null));
            }
            assertTrue(log.log(Level.SEVERE, "k", 1, "s", null));
            assertEquals("s", records.get(0).getMessage());
        } finally {
            logger.setLevel(null);
        }
    }

    /** A message longer than MAX_CHARS (e.g. an exception quoting a peer's 1 MB string) is cut, saying how much. */
    @Test
    public void aLongMessageIsCut() {
        StringBuilder quoted = new StringBuilder();
        for (int i = 0; i < 1_000_000; i++) {
            quoted.append('x');
        }
        log.caused(Level.WARNING, "bad payload", 7, "cannot create message 1/2 from 7",
                new IllegalStateException("bad name " + quoted));
        String m = records.get(0).getMessage();
        String prefix = "cannot create message 1/2 from 7: java.lang.IllegalStateException: bad name ";
        int more = prefix.length() + 1_000_000 - RateLimitedLog.MAX_CHARS;
        assertEquals(RateLimitedLog.MAX_CHARS + ("… (" + more + " more characters)").length(), m.length());
        assertTrue(m.substring(0, 100), m.startsWith(prefix) && m.endsWith("x… (" + more + " more characters)"));
    }
}
