package io.ibdxnet.compat;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.junit.Assume;
import org.junit.Test;

/**
 * Upstream's own benchmark, {@code de.hhu.bsinfo.dxnet.DXNetMain}, unchanged, as
 * two processes over NIO with our library alone in its {@code m_jniPath}: it
 * {@code System.load}s every file there whatever the device, which used to fail
 * (our {@code JNI_OnLoad} refused a JVM without our jar). 2000 messages of 64 B.
 */
public class UpstreamDxnetMainTest {
    @Test(timeout = 180_000)
    public void dxnetMainOverNioWithOurLibraryInItsJniPath() throws Exception {
        String upstreamCp = System.getProperty("compat.upstreamClasspath");
        Assume.assumeTrue("compat.upstreamClasspath not set (run through gradle compatTest)", upstreamCp != null);
        File dir = new File(System.getProperty("compat.dir"));
        File lib = new File(System.getProperty("java.library.path").split(File.pathSeparator)[0], "libibdxnet.so");
        Path work = Files.createTempDirectory("dxnetmain");
        Path jni = Files.createDirectory(work.resolve("jni"));
        Files.copy(lib.toPath(), jni.resolve("libibdxnet.so"), StandardCopyOption.REPLACE_EXISTING);
        int base = 30000 + ThreadLocalRandom.current().nextInt(20000);
        String config = new String(Files.readAllBytes(new File(dir, "dxnetmain-nio.json").toPath()),
                StandardCharsets.UTF_8).replace("24221", Integer.toString(base)).replace("24222",
                Integer.toString(base + 1));
        Files.write(work.resolve("config.json"), config.getBytes(StandardCharsets.UTF_8));
        List<String> java = Arrays.asList(System.getProperty("java.home") + "/bin/java", "-Xcheck:jni",
                "--add-opens", "java.base/java.nio=ALL-UNNAMED", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
                "-Dlog4j.configurationFile=file:" + new File(dir, "log4j2.xml").getAbsolutePath(), "-cp", upstreamCp,
                "de.hhu.bsinfo.dxnet.DXNetMain", "config.json", "1000", "1");
        Process receiver = start(work, java, "receiver.log", "0", "2000", "64", "1", "1");
        Process sender = start(work, java, "sender.log", "2000", "0", "64", "1", "0", "1");
        assertTrue("sender finished", sender.waitFor(150, TimeUnit.SECONDS));
        assertTrue("receiver finished", receiver.waitFor(30, TimeUnit.SECONDS));
        String s = new String(Files.readAllBytes(work.resolve("sender.log")), StandardCharsets.UTF_8);
        String r = new String(Files.readAllBytes(work.resolve("receiver.log")), StandardCharsets.UTF_8);
        assertEquals(s, 0, sender.exitValue());
        assertEquals(r, 0, receiver.exitValue());
        assertTrue(s, s.contains("Loading jni file jni/libibdxnet.so"));
        assertTrue(s, s.contains("[RESULTS SEND: Runtime=") && s.contains("Msgs=2000"));
        assertTrue(r, r.contains("[RESULTS RECV: Runtime=") && r.contains("Msgs=2000"));
        assertTrue(s + r, !s.contains("WARNING in native method") && !r.contains("WARNING in native method"));
        for (File f : work.toFile().listFiles()) {
            if (f.isDirectory()) {
                for (File g : f.listFiles()) {
                    Files.delete(g.toPath());
                }
            }
            Files.delete(f.toPath());
        }
    }

    private static Process start(Path work, List<String> java, String log, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(java);
        cmd.addAll(Arrays.asList(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(work.toFile()).redirectErrorStream(true)
                .redirectOutput(work.resolve(log).toFile());
        return pb.start();
    }
}
