package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.DemoMain;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * What the JDK running the tests prints for a user's process: the demo over
 * the ib transport (JNI, the shared structs, the rings) and over nio, in a
 * child JVM of this JDK with this test's classpath (the multi-release jar
 * under {@code test25}). With {@code --enable-native-access=ALL-UNNAMED}, the
 * one flag README asks for, nothing about {@code sun.misc.Unsafe} or
 * restricted methods may appear (JEP 471/498 warn on JDK 24+ about Unsafe's
 * memory methods, JEP 472 about JNI loading and FFM's restricted methods).
 */
public class JvmWarningsTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final String FLAG = "--enable-native-access=ALL-UNNAMED";

    private static String run(String transport, boolean withFlag) throws Exception {
        String classes = System.getProperty("test.classpath", System.getProperty("java.class.path"));
        List<String> cmd = new ArrayList<>(Arrays.asList(System.getProperty("java.home") + "/bin/java"));
        if (withFlag) {
            cmd.add(FLAG);
        }
        cmd.addAll(Arrays.asList("-cp", classes, "-Djava.library.path=" + System.getProperty("java.library.path"),
                DemoMain.class.getName(), "--transport", transport, "--fabric", "sim",
                "--messages", "2000", "--requests", "100", "--size", "64"));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (InputStream in = p.getInputStream()) {
            in.transferTo(out);
        }
        assertTrue("demo did not end in 120 s", p.waitFor(120, TimeUnit.SECONDS));
        String text = out.toString(StandardCharsets.UTF_8);
        assertEquals("demo over " + transport + " failed:\n" + text, 0, p.exitValue());
        return text;
    }

    private static void assertNoJdkWarning(String what, String output) {
        for (String line : output.split("\n")) {
            boolean warning = line.contains("sun.misc.Unsafe") || line.contains("terminally deprecated")
                    || line.contains("restricted method") || line.contains("enable-native-access");
            assertTrue(what + " printed a JDK warning on JDK " + Runtime.version() + ": " + line + "\n" + output, !warning);
        }
    }

    @Test(timeout = 300_000)
    public void nothingPrintedWithTheDocumentedFlag() throws Exception {
        assertNoJdkWarning("demo over ib", run("ib", true));
        assertNoJdkWarning("demo over nio", run("nio", true));
    }

    /** The positive control: the check above does see the JDK's warning (JDK 24+ without the flag). */
    @Test(timeout = 300_000)
    public void withoutTheFlagJdk24AndLaterWarnAboutNativeAccess() throws Exception {
        String out = run("ib", false);
        if (Runtime.version().feature() >= 24) {
            assertTrue("expected the JDK's native-access warning without " + FLAG + ":\n" + out,
                    out.contains("--enable-native-access"));
            assertTrue("no Unsafe warning even without the flag:\n" + out, !out.contains("sun.misc.Unsafe"));
        } else {
            assertNoJdkWarning("demo over ib without the flag", out);
        }
    }
}
