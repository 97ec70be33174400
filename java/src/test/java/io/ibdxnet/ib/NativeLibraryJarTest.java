package io.ibdxnet.ib;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import java.io.ByteArrayInputStream;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.junit.rules.Timeout;

/**
 * The library as a user gets it: from the built jar, in a child JVM whose
 * java.library.path holds no libibdxnet.so; a jar/library version mismatch;
 * no library anywhere.
 */
public class NativeLibraryJarTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private static String jar() {
        String jar = System.getProperty("test.jar");
        assertTrue("test.jar is not set (run through Gradle)", jar != null && new File(jar).isFile());
        return jar;
    }

    /** Exit code and output (stdout + stderr) of a child JVM running {@link LoadLibraryMain}. */
    private String[] child(String classpath, String... jvmArgs) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(System.getProperty("java.home") + "/bin/java");
        cmd.add("-Djava.library.path=" + tmp.newFolder("empty-library-path"));
        cmd.add("-Djava.io.tmpdir=" + tmp.newFolder("jvm-tmp"));
        cmd.add("--enable-native-access=ALL-UNNAMED"); // no JDK 22+ warning in the output checked below
        cmd.addAll(Arrays.asList(jvmArgs));
        cmd.add("-cp");
        cmd.add(classpath);
        cmd.add(LoadLibraryMain.class.getName());
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        assertTrue("child JVM did not finish in 60 s", p.waitFor(60, TimeUnit.SECONDS));
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        return new String[] {Integer.toString(p.exitValue()), out};
    }

    private static String testClasses() {
        return System.getProperty("test.classesDirs");
    }

    /**
     * {@code NativeLibrary.load()} before any other class of the library: the
     * registration in {@code JNI_OnLoad} initialises the natives' class, whose
     * initialiser calls a native; loaded this way it once ran before the
     * natives were registered and the load failed (the JMH natives' path).
     */
    @Test
    public void loadingTheLibraryFirstRegistersTheNatives() throws Exception {
        io.ibdxnet.ChildJvm.Result r = io.ibdxnet.ChildJvm.run(LoadLibraryMain.class, List.of(), List.of("load-first"), 60_000);
        assertEquals(r.output, 0, r.exit);
        assertTrue(r.output, r.output.contains("default keys: ") && !r.output.contains("JNI_OnLoad failed"));
    }

    @Test
    public void loadsTheLibraryTheJarCarries() throws Exception {
        String[] r = child(jar() + File.pathSeparator + testClasses());
        assertEquals(r[1], "0", r[0]);
        Matcher m = Pattern.compile("loaded from: classpath resource native/linux-x86_64/libibdxnet.so \\(extracted to (\\S+)\\)")
                .matcher(r[1]);
        assertTrue(r[1], m.find());
        assertTrue(r[1], r[1].contains("default keys: "));
        assertFalse("the extracted copy is deleted once loaded: " + m.group(1), new File(m.group(1)).exists());
        File[] left = new File(tmp.getRoot(), "jvm-tmp").listFiles();
        assertEquals("files left in the child's tmpdir: " + Arrays.toString(left), 0, left.length);
    }

    @Test
    public void aLibraryBuiltForAnotherJarIsRefusedNamingBothVersions() throws Exception {
        // A jar expecting 9.9.9: its version resource first on the classpath.
        File fake = tmp.newFolder("fake-version");
        Path props = fake.toPath().resolve("io/ibdxnet/ib/native-version.properties");
        Files.createDirectories(props.getParent());
        Files.write(props, "version=9.9.9\nabi=77\n".getBytes(StandardCharsets.UTF_8));
        String[] r = child(fake + File.pathSeparator + jar() + File.pathSeparator + testClasses());
        assertNotEquals(r[1], "0", r[0]);
        String actual = NativeLibrary.expectedVersion();
        assertTrue(r[1], r[1].contains("NativeLibrary$LibraryMismatchError"));
        assertTrue(r[1], r[1].contains("is libibdxnet " + actual + ", but this jar (io.ibdxnet:ibdxnet) expects 9.9.9 abi 77"));
        assertTrue(r[1], r[1].contains("classpath resource native/linux-x86_64/libibdxnet.so"));
    }

    @Test
    public void noLibraryAnywhereNamesEveryPlaceTried() throws Exception {
        // Classes without the jar: nothing on java.library.path, beside the classes or on the classpath.
        StringBuilder cp = new StringBuilder(testClasses());
        cp.append(File.pathSeparator).append(System.getProperty("test.mainClassesDirs"));
        String[] r = child(cp.toString());
        assertNotEquals(r[1], "0", r[0]);
        assertTrue(r[1], r[1].contains("libibdxnet.so could not be loaded; tried: -Dibdxnet.library (not set); java.library.path="));
        assertTrue(r[1], r[1].contains("next to the jar ("));
        assertTrue(r[1], r[1].contains("classpath resource native/linux-x86_64/libibdxnet.so (not on the classpath"));
    }

    @Test
    public void anExplicitPathThatDoesNotLoadIsNamedAndNothingElseIsTried() throws Exception {
        String[] r = child(jar() + File.pathSeparator + testClasses(), "-Dibdxnet.library=/nonexistent/libibdxnet.so");
        assertNotEquals(r[1], "0", r[0]);
        assertTrue(r[1], r[1].contains("libibdxnet.so from -Dibdxnet.library=/nonexistent/libibdxnet.so could not be loaded"
                + " (nothing else is tried when it is set)"));
    }

    @Test
    public void theJarCarriesTheLicenceCargoTomlDeclares() throws IOException {
        // MIT OR Apache-2.0: both texts, as in the repository's root.
        try (java.util.jar.JarFile j = new java.util.jar.JarFile(jar())) {
            for (String name : new String[] {"LICENSE-MIT", "LICENSE-APACHE"}) {
                java.util.jar.JarEntry e = j.getJarEntry("META-INF/" + name);
                assertTrue("META-INF/" + name + " is not in " + jar(), e != null);
                byte[] inJar = j.getInputStream(e).readAllBytes();
                Path root = new File(jar()).toPath().toAbsolutePath().getParent().getParent().getParent();
                assertTrue(name, Arrays.equals(Files.readAllBytes(root.resolve(name)), inJar));
            }
        }
    }

    @Test
    public void theVersionThisJarExpectsComesFromTheBuild() {
        assertTrue(NativeLibrary.expectedVersion(), NativeLibrary.expectedVersion().matches("\\d+\\.\\d+\\.\\d+\\S* abi \\d+"));
    }

    @Test
    public void theMismatchMessageNamesTheLibraryAndBothVersions() {
        try {
            NativeLibrary.checkLibraryVersion("0.0.1 abi 0");
            throw new AssertionError("a library of version 0.0.1 abi 0 was accepted");
        } catch (NativeLibrary.LibraryMismatchError e) {
            assertTrue(e.getMessage(), e.getMessage().contains("is libibdxnet 0.0.1 abi 0, but this jar (io.ibdxnet:ibdxnet) expects "
                    + NativeLibrary.expectedVersion()));
        }
        NativeLibrary.checkLibraryVersion(NativeLibrary.expectedVersion());
    }

    @Test
    public void theExtractedCopyIsTheOwnersOnly() throws IOException {
        Path f = NativeLibrary.extract(new ByteArrayInputStream(new byte[] {1, 2, 3}), tmp.getRoot().toPath());
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(f)));
        assertEquals(3, Files.size(f));
    }
}
