package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.DemoMain;
import java.util.List;
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
        List<String> jvm = withFlag ? List.of(FLAG) : List.of();
        ChildJvm.Result r = ChildJvm.run(DemoMain.class, jvm, List.of("--transport", transport, "--fabric", "sim",
                "--messages", "2000", "--requests", "100", "--size", "64"), 120_000);
        String text = r.output;
        assertEquals("demo over " + transport + " failed:\n" + text, 0, r.exit);
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
