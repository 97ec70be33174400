package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.StringWriter;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The jar as users run it (the one {@code publishToMavenLocal} publishes:
 * {@code test.jar}), on JDK 17 and Temurin 25 ({@code test.jdkHomes}): the
 * application of {@code examples/} as a named module on the module path and
 * as plain classes on the class path, over nio and over ib (sim: the library
 * loads from the jar), with the descriptor and the command lines docs/deployment.md gives. The jar
 * is the module {@code io.ibdxnet} exporting {@code io.ibdxnet} only: a
 * module that imports an internal package does not compile, and reflection
 * into one fails on the module path (and works on the class path: the probe's
 * positive control).
 */
public class ModulePathTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(15);

    private static Path work;
    private static String jar;
    private static String gson;
    /** The example compiled as the named module {@code example}. */
    private static Path exampleModule;
    /** The probe compiled as the named module {@code probe}. */
    private static Path probeModule;

    /** The descriptor the example gets here (examples/ has none); docs/deployment.md shows it. */
    static final String EXAMPLE_MODULE_INFO = "module example {\n    requires io.ibdxnet;\n    exports example;\n}\n";

    @BeforeClass
    public static void compile() throws IOException {
        jar = System.getProperty("test.jar");
        assertTrue("test.jar is not set (the Gradle test task sets it)", jar != null && new File(jar).isFile());
        gson = Arrays.stream(System.getProperty("test.classpath", System.getProperty("java.class.path")).split(File.pathSeparator))
                .filter(p -> new File(p).getName().startsWith("gson-")).findFirst()
                .orElseThrow(() -> new AssertionError("no gson jar on the test classpath"));
        work = Files.createTempDirectory("modulepath");
        // The example's own sources plus a module descriptor, as a modular application writes it.
        Path exampleSrc = work.resolve("example-src");
        Path pkg = Files.createDirectories(exampleSrc.resolve("example"));
        try (Stream<Path> s = Files.list(Paths.get("examples/src/main/java/example"))) {
            for (Path p : (Iterable<Path>) s.filter(f -> f.toString().endsWith(".java"))::iterator) {
                Files.copy(p, pkg.resolve(p.getFileName()));
            }
        }
        Files.writeString(exampleSrc.resolve("module-info.java"), EXAMPLE_MODULE_INFO);
        exampleModule = work.resolve("example");
        String out = javac(exampleModule, exampleSrc);
        assertEquals("the example did not compile as a module:\n" + out, "", out);

        Path probeSrc = work.resolve("probe-src");
        Files.createDirectories(probeSrc.resolve("probe"));
        Files.writeString(probeSrc.resolve("module-info.java"), "module probe {\n    requires io.ibdxnet;\n}\n");
        Files.writeString(probeSrc.resolve("probe/Probe.java"), String.join("\n",
                "package probe;",
                "",
                "public final class Probe {",
                "    public static void main(String[] args) throws Exception {",
                "        Class<?> c = Class.forName(\"io.ibdxnet.internal.Transports\");",
                "        try {",
                "            Object s = c.getMethod(\"nioSettings\", io.ibdxnet.DXNetConfig.class)",
                "                    .invoke(null, new io.ibdxnet.DXNetConfig(0));",
                "            System.out.println(\"internal: accessible (\" + s.getClass().getName() + \")\");",
                "        } catch (IllegalAccessException e) {",
                "            System.out.println(\"internal: inaccessible (\" + e.getMessage() + \")\");",
                "        }",
                "    }",
                "}", ""));
        probeModule = work.resolve("probe");
        out = javac(probeModule, probeSrc);
        assertEquals("the probe did not compile:\n" + out, "", out);
    }

    @AfterClass
    public static void cleanUp() throws IOException {
        if (work != null) {
            try (Stream<Path> s = Files.walk(work)) {
                s.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
            }
        }
    }

    /** javac --release 17 of every source below {@code src} into {@code out}, against the jar and gson as modules. */
    private static String javac(Path out, Path src) throws IOException {
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        assertTrue("no system Java compiler (a JRE runs the tests?)", javac != null);
        List<String> args = new ArrayList<>(Arrays.asList("--release", "17", "-d", out.toString(),
                "--module-path", jar + File.pathSeparator + gson));
        try (Stream<Path> s = Files.walk(src)) {
            args.addAll(s.filter(p -> p.toString().endsWith(".java")).map(Path::toString).collect(Collectors.toList()));
        }
        StringWriter diagnostics = new StringWriter();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = javac.run(null, null, err, args.toArray(new String[0]));
        diagnostics.append(err.toString(StandardCharsets.UTF_8));
        return rc == 0 ? "" : "javac exit " + rc + "\n" + diagnostics;
    }

    /** The JDKs to run on: {@code test.jdkHomes}, else the one running the tests. */
    private static List<String> jdks() {
        String homes = System.getProperty("test.jdkHomes", System.getProperty("java.home"));
        List<String> out = new ArrayList<>();
        for (String h : homes.split(File.pathSeparator)) {
            assertTrue("no java in " + h + " (test.jdkHomes)", new File(h, "bin/java").canExecute());
            out.add(h);
        }
        return out;
    }

    /** docs/deployment.md's module-path command line: {@code java --enable-native-access=io.ibdxnet --module-path ... -m example/example.Example T}. */
    static List<String> modulePathCommand(String java, String jar, String gson, String app, String transport) {
        return Arrays.asList(java, "--enable-native-access=io.ibdxnet",
                "--module-path", String.join(File.pathSeparator, jar, gson, app), "-m", "example/example.Example", transport);
    }

    /** docs/deployment.md's class-path command line: {@code java --enable-native-access=ALL-UNNAMED -cp ... example.Example T}. */
    static List<String> classPathCommand(String java, String jar, String gson, String app, String transport) {
        return Arrays.asList(java, "--enable-native-access=ALL-UNNAMED",
                "-cp", String.join(File.pathSeparator, jar, gson, app), "example.Example", transport);
    }

    private static String run(List<String> cmd) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        // Nothing from this build: the library must come from the jar (or, for nio, not be needed).
        pb.environment().remove("LD_LIBRARY_PATH");
        pb.environment().remove("JAVA_TOOL_OPTIONS");
        Process p = pb.start();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (InputStream in = p.getInputStream()) {
            in.transferTo(out);
        }
        assertTrue(String.join(" ", cmd) + " did not end in 120 s", p.waitFor(120, TimeUnit.SECONDS));
        String text = out.toString(StandardCharsets.UTF_8);
        assertEquals(String.join(" ", cmd) + " failed:\n" + text, 0, p.exitValue());
        return text;
    }

    /** The example's result line, and no JDK warning about native access (the flag names the right module). */
    private static void assertExchanged(List<String> cmd, String output) {
        String what = String.join(" ", cmd);
        assertTrue(what + ": no exchange reported:\n" + output,
                output.contains("received all " + 1000 + " events"));
        for (String line : output.split("\n")) {
            boolean warning = line.contains("restricted method") || line.contains("enable-native-access")
                    || line.contains("sun.misc.Unsafe");
            assertTrue(what + " printed a JDK warning: " + line + "\n" + output, !warning);
        }
    }

    @Test
    public void theJarIsTheModuleIoIbdxnetExportingOnlyTheApi() {
        Optional<ModuleReference> ref = ModuleFinder.of(Paths.get(jar)).find("io.ibdxnet");
        assertTrue("the jar declares no module io.ibdxnet", ref.isPresent());
        ModuleDescriptor d = ref.get().descriptor();
        assertTrue("an automatic module, not a declared one", !d.isAutomatic());
        assertEquals("[io.ibdxnet]", d.exports().stream().map(e -> e.source() + (e.isQualified() ? " to " + e.targets() : ""))
                .sorted().collect(Collectors.toList()).toString());
        assertTrue("gson is not required: " + d.requires(),
                d.requires().stream().anyMatch(r -> r.name().equals("com.google.gson")));
        assertTrue("internal packages are in the module: " + d.packages(), d.packages().contains("io.ibdxnet.internal"));
    }

    @Test
    public void theExampleRunsOnTheModulePathAndTheClassPath() throws Exception {
        // The class-path run uses the same classes (a module-info.class on the class path is ignored).
        for (String home : jdks()) {
            String java = home + "/bin/java";
            for (String transport : new String[] {"nio", "ib"}) {
                List<String> m = modulePathCommand(java, jar, gson, exampleModule.toString(), transport);
                String out = run(m);
                assertExchanged(m, out);
                System.out.println(String.join(" ", m) + "\n" + out.trim());
                List<String> c = classPathCommand(java, jar, gson, exampleModule.toString(), transport);
                out = run(c);
                assertExchanged(c, out);
                System.out.println(String.join(" ", c) + "\n" + out.trim());
            }
        }
    }

    @Test
    public void anInternalPackageIsNotAccessibleOnTheModulePath() throws Exception {
        for (String home : jdks()) {
            String java = home + "/bin/java";
            String modular = run(Arrays.asList(java, "--module-path", String.join(File.pathSeparator, jar, gson,
                    probeModule.toString()), "-m", "probe/probe.Probe"));
            assertTrue(home + ", module path: the internal package was reachable:\n" + modular,
                    modular.contains("internal: inaccessible") && modular.contains("does not export io.ibdxnet.internal"));
            // The probe's positive control: on the class path everything is one unnamed module.
            String plain = run(Arrays.asList(java, "-cp", String.join(File.pathSeparator, jar, gson, probeModule.toString()),
                    "probe.Probe"));
            assertTrue(home + ", class path: the probe did not reach the internal package:\n" + plain,
                    plain.contains("internal: accessible"));
        }
    }

    @Test
    public void aModuleImportingAnInternalPackageDoesNotCompile() throws IOException {
        Path src = work.resolve("bad-src");
        Files.createDirectories(src.resolve("bad"));
        Files.writeString(src.resolve("module-info.java"), "module bad {\n    requires io.ibdxnet;\n}\n");
        Files.writeString(src.resolve("bad/Bad.java"),
                "package bad;\n\nimport io.ibdxnet.internal.Transports;\n\nclass Bad {\n    Transports t;\n}\n");
        String out = javac(work.resolve("bad"), src);
        assertTrue("a module importing io.ibdxnet.internal compiled:\n" + out,
                out.contains("package io.ibdxnet.internal is not visible"));
        // The control: the same module importing the API compiles.
        Files.writeString(src.resolve("bad/Bad.java"), "package bad;\n\nimport io.ibdxnet.DXNet;\n\nclass Bad {\n    DXNet n;\n}\n");
        out = javac(work.resolve("good"), src);
        assertEquals("a module importing the API did not compile:\n" + out, "", out);
    }
}
