package io.ibdxnet.compat;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;

import org.junit.Test;

/**
 * Upstream's way of loading the library, in a child JVM without our jar:
 * {@code JNI_OnLoad} must not fail (it used to refuse the load when
 * {@code io.ibdxnet.ib.NativeLibrary} was missing), and upstream's natives work.
 * With {@code -Xcheck:jni}: no JNI warning.
 */
public class UpstreamOnlyLoadTest {
    @Test(timeout = 120_000)
    public void upstreamAloneLoadsAndInitialises() throws Exception {
        String lib = new File(System.getProperty("java.library.path").split(File.pathSeparator)[0],
                "libibdxnet.so").getAbsolutePath();
        // Only the compat classes and dxnet.jar: nothing of io.ibdxnet's main classes.
        StringBuilder cp = new StringBuilder();
        for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (e.endsWith("dxnet.jar") || e.replace('\\', '/').contains("classes/java/compat")) {
                cp.append(cp.length() == 0 ? "" : File.pathSeparator).append(e);
            }
        }
        Path out = Files.createTempFile("upstream-only", ".log");
        ProcessBuilder pb = new ProcessBuilder(Arrays.asList(
                System.getProperty("java.home") + "/bin/java", "-Xcheck:jni", "-cp", cp.toString(),
                UpstreamOnlyMain.class.getName(), lib));
        pb.environment().put("IBDXNET_FABRIC", "sim");
        pb.environment().put("IBDXNET_COMPAT_LISTEN", "127.0.0.1:0");
        pb.redirectErrorStream(true).redirectOutput(out.toFile());
        Process p = pb.start();
        assertTrue("child finished", p.waitFor(100, TimeUnit.SECONDS));
        String text = new String(Files.readAllBytes(out), StandardCharsets.UTF_8);
        Files.delete(out);
        assertEquals(text, 0, p.exitValue());
        assertTrue(text, text.contains("UPSTREAM-ONLY OK"));
        assertFalse("JNI warnings: " + text, text.contains("WARNING in native method"));
        assertFalse(text, text.contains("JNI_OnLoad failed"));
    }
}
