package io.ibdxnet.ib;

import static io.ibdxnet.TestSupport.waitFor;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;

import io.ibdxnet.LogCapture;
import io.ibdxnet.TestSupport;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
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

    // Strong references: JUL holds its loggers weakly.
    private final Logger manager = Logger.getLogger("ibdxnet.con.manager");
    private final Logger stats = Logger.getLogger("ibdxnet.stats");
    private final LogCapture managerRecords = new LogCapture();
    private final LogCapture statsRecords = new LogCapture();

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

    /** Exit code and output (stdout + stderr) of a child JVM running {@link NativeLogExitMain}. */
    private static String[] child(String rustLog) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(System.getProperty("java.home") + "/bin/java");
        cmd.add("-Djava.library.path=" + System.getProperty("java.library.path"));
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(NativeLogExitMain.class.getName());
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().remove("RUST_LOG");
        if (rustLog != null) {
            pb.environment().put("RUST_LOG", rustLog);
        }
        File out = File.createTempFile("native-log-child", ".txt");
        out.deleteOnExit();
        pb.redirectOutput(out);
        Process p = pb.start();
        boolean ended = p.waitFor(60, TimeUnit.SECONDS);
        if (!ended) {
            p.destroyForcibly();
        }
        String text = new String(java.nio.file.Files.readAllBytes(out.toPath()), StandardCharsets.UTF_8);
        assertTrue("the child JVM did not exit in 60 s:\n" + text, ended);
        return new String[] {Integer.toString(p.exitValue()), text};
    }

    @Test
    public void aFullQueueDropsWithACountAndTheJvmExitsWhileTheEngineLogs() throws Exception {
        String[] r = child(null);
        assertEquals(r[1], "0", r[0]);
        assertTrue(r[1], r[1].contains("toSystemLogger=true"));
        assertTrue(r[1], r[1].matches("(?s).*dropped: ibdxnet\\.jni\\.logbridge WARNING \\d+ native log records dropped.*"));
        assertFalse("nothing on stderr's log format:\n" + r[1], r[1].contains("ibdxnet::stats]"));
    }

    @Test
    public void withRustLogTheRecordsStayOnStderr() throws Exception {
        String[] r = child("info");
        assertEquals(r[1], "0", r[0]);
        assertTrue(r[1], r[1].contains("toSystemLogger=false"));
        assertTrue(r[1], r[1].contains("INFO  ibdxnet::stats] node 0x0000: counters"));
        assertTrue(r[1], r[1].contains("records seen 0"));
    }
}
