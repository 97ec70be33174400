package io.ibdxnet.ib;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;

import io.ibdxnet.TestSupport;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.After;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The engine's native log records arrive in System.Logger (here JUL) with their names and levels. */
public class NativeLogTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    /** Captures what reaches a JUL logger. */
    private static final class Capture extends Handler {
        final List<LogRecord> records = new CopyOnWriteArrayList<>();

        @Override
        public void publish(LogRecord r) {
            records.add(r);
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}

        LogRecord find(String text) {
            for (LogRecord r : records) {
                if (r.getMessage() != null && r.getMessage().contains(text)) {
                    return r;
                }
            }
            return null;
        }
    }

    // Strong references: JUL holds its loggers weakly.
    private final Logger manager = Logger.getLogger("ibdxnet.con.manager");
    private final Logger stats = Logger.getLogger("ibdxnet.stats");
    private final Capture managerRecords = new Capture();
    private final Capture statsRecords = new Capture();

    @Before
    public void capture() {
        manager.addHandler(managerRecords);
        stats.addHandler(statsRecords);
    }

    @After
    public void release() {
        manager.removeHandler(managerRecords);
        stats.removeHandler(statsRecords);
        manager.setLevel(null);
    }

    @Test
    public void rustLogIsTheOnlyOverride() {
        assertEquals("native records reach System.Logger unless RUST_LOG is set", System.getenv("RUST_LOG") == null,
                NativeLog.toSystemLogger());
    }

    @Test
    public void everyDocumentedLoggerNameIsDotted() {
        List<String> names = NativeLog.loggerNames();
        assertTrue(names.contains("ibdxnet.con.manager"));
        assertTrue(names.contains("ibdxnet.stats"));
        for (String n : names) {
            assertTrue(n, n.startsWith("ibdxnet") && !n.contains(":"));
        }
    }

    @Test
    public void aWarningOfTheEngineArrivesInItsLogger() throws Exception {
        assumeTrue("RUST_LOG is set: the records stay on stderr", NativeLog.toSystemLogger());
        try (NativeEngine e = NativeEngine.start(StreamCallbacks.simConfig(0), new StreamCallbacks(0, 0))) {
            // A table address that names no peer: the connection manager warns.
            e.addNode(7, "0.0.0.0", 5999);
            waitFor("the warning in ibdxnet.con.manager", () -> managerRecords.find("is unspecified") != null);
        }
        LogRecord r = managerRecords.find("is unspecified");
        assertEquals("ibdxnet.con.manager", r.getLoggerName());
        assertEquals(Level.WARNING, r.getLevel());
        assertTrue(r.getMessage(), r.getMessage().contains("table address 0.0.0.0:5999 is unspecified"));
    }

    @Test
    public void recordsOfThreadsOutsideTheJvmArriveToo() throws Exception {
        assumeTrue("RUST_LOG is set: the records stay on stderr", NativeLog.toSystemLogger());
        // The statistics print thread is a plain native thread, never attached to the JVM.
        Map<String, String> c = StreamCallbacks.simConfig(0);
        c.put("stats_print_interval_ms", "50");
        try (NativeEngine e = NativeEngine.start(c, new StreamCallbacks(0, 0))) {
            assertTrue(e.localPort() > 0);
            waitFor("a statistics line in ibdxnet.stats", () -> statsRecords.find("counters") != null);
        }
        LogRecord r = statsRecords.find("counters");
        assertEquals("ibdxnet.stats", r.getLoggerName());
        assertEquals(Level.INFO, r.getLevel());
    }

    @Test
    public void theEngineFormatsWhatTheLoggersEnable() {
        assumeTrue("RUST_LOG is set: the records stay on stderr", NativeLog.toSystemLogger());
        int before = NativeLog.enabledLevel();
        manager.setLevel(Level.FINEST);
        assertEquals("TRACE", 5, NativeLog.enabledLevel());
        manager.setLevel(Level.FINE);
        assertEquals("DEBUG", Math.max(before, 4), NativeLog.enabledLevel());
        manager.setLevel(null);
        NativeLog.refreshLevels();
        assertEquals(before, NativeLog.enabledLevel());
    }
}
