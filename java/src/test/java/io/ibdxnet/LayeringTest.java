package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The Java layering, checked over the sources: each package (or file node:
 * {@link #FILE_NODES}) may use only the packages {@link #ALLOWED} lists (all
 * of them lower), the packages the code really uses form no cycle, and
 * within each package the files (top-level classes) that name each other
 * form no cycle either, but for the pairs {@link #FILE_CYCLES_ALLOWED} lists.
 * A new package fails until it is placed here.
 */
public class LayeringTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final String ROOT = "io.ibdxnet";
    /**
     * The API's exception: thrown by the transports and DXNet alike, so it is
     * a node of its own under everything (it imports nothing of ours), not part
     * of the root package's place.
     */
    private static final String EXCEPTION = ROOT + ".NetworkException";
    /** The reason the exception carries ({@code FailureReason}): below it, importing nothing. */
    private static final String REASON = ROOT + ".FailureReason";
    /**
     * The API's entry point: a node of its own at the top, above the
     * internals it puts together. The rest of the root package (messages,
     * configuration, exceptions: the API's types) sits below the internals,
     * which use those types.
     */
    private static final String FACADE = ROOT + ".DXNet";
    /**
     * The internals' access to the API types' package-private members
     * ({@code internal.ApiAccess}, implemented in the root package): above
     * both, nothing uses it by name.
     */
    private static final String BRIDGE = ROOT + ".ApiBridge";
    /**
     * The facade's machinery, split out of {@code DXNet} into package-private
     * files: part of its node (they put the internals together as it did).
     */
    private static final Set<String> FACADE_PARTS = new TreeSet<>(Arrays.asList(ROOT + ".NodeCore",
            ROOT + ".NodeSends", ROOT + ".NodeStats", ROOT + ".LossReports"));
    /** Files of the root package that are nodes of their own. */
    private static final Set<String> FILE_NODES = new TreeSet<>(Arrays.asList(EXCEPTION, REASON, FACADE, BRIDGE));

    /** Package (or {@link #EXCEPTION}) to the packages it may use; bottom first. */
    static final Map<String, Set<String>> ALLOWED = new TreeMap<>();

    static {
        allow("memory");
        allow("metrics");
        allow(REASON);
        allow(EXCEPTION, REASON);
        allow("transport", "memory", EXCEPTION, REASON);
        allow("core", "memory", "transport");
        for (String impl : new String[] {"ib", "nio", "loopback"}) {
            allow(impl, "memory", "transport", "core", EXCEPTION, REASON);
        }
        allow(ROOT, "memory", "transport", EXCEPTION, REASON);
        allow("internal", "memory", "transport", "core", "ib", "nio", "loopback", ROOT, EXCEPTION, REASON);
        allow(BRIDGE, "transport", "internal", ROOT, EXCEPTION, REASON);
        allow(FACADE, "memory", "metrics", "transport", "core", "ib", "nio", "loopback", "internal", ROOT, EXCEPTION, REASON);
        allow("app", FACADE, ROOT, EXCEPTION, REASON);
        // The cluster workload and its history checker (issue 29): an application like the demo.
        allow("app.cluster", "app", FACADE, ROOT, EXCEPTION, REASON);
    }

    private static void allow(String pkg, String... uses) {
        ALLOWED.put(qualify(pkg), Arrays.stream(uses).map(LayeringTest::qualify).collect(Collectors.toCollection(TreeSet::new)));
    }

    private static String qualify(String p) {
        return p.startsWith(ROOT) ? p : ROOT + "." + p;
    }

    /** A reference to a class of ours: the package, then the first capitalized segment (or a wildcard). */
    private static final Pattern REFERENCE = Pattern.compile("\\bio\\.ibdxnet((?:\\.[a-z_][a-z0-9_]*)*)\\.([A-Z]\\w*|\\*)");

    /** One use of a package by a file. */
    static final class Use {
        final String from;
        final String to;
        final String where;

        Use(String from, String to, String where) {
            this.from = from;
            this.to = to;
            this.where = where;
        }
    }

    @Test
    public void everyPackageUsesOnlyTheLayersBelowIt() throws IOException {
        List<Use> uses = scan(Paths.get("java/src/main/java"), Paths.get("java/src/main/java22"));
        Set<String> seen = new TreeSet<>();
        List<String> wrong = new ArrayList<>();
        for (Use u : uses) {
            seen.add(u.from);
            Set<String> allowed = ALLOWED.get(u.from);
            if (allowed == null) {
                wrong.add(u.where + ": package " + u.from + " is not in LayeringTest.ALLOWED (place it in a layer)");
            } else if (!allowed.contains(u.to)) {
                wrong.add(u.where + ": " + u.from + " uses " + u.to + ", but may use only " + allowed);
            }
        }
        assertTrue("no package may use an upper or sibling layer:\n" + String.join("\n", wrong), wrong.isEmpty());
        // The scan saw the code (a wrong directory would pass vacuously).
        assertTrue("scanned packages: " + seen,
                seen.containsAll(Arrays.asList(ROOT, FACADE, ROOT + ".internal", ROOT + ".transport", ROOT + ".ib")));
    }

    @Test
    public void thePackagesFormNoCycle() throws IOException {
        Map<String, Set<String>> graph = new TreeMap<>();
        for (Use u : scan(Paths.get("java/src/main/java"), Paths.get("java/src/main/java22"))) {
            graph.computeIfAbsent(u.from, k -> new TreeSet<>()).add(u.to);
        }
        List<String> cycle = findCycle(graph);
        assertTrue("import cycle: " + String.join(" -> ", cycle) + "\ngraph: " + graph, cycle.isEmpty());
        // The allowed table is a layering too: no arrow in it may close a cycle.
        List<String> tableCycle = findCycle(ALLOWED);
        assertTrue("LayeringTest.ALLOWED has a cycle: " + String.join(" -> ", tableCycle), tableCycle.isEmpty());
    }

    @Test
    public void theCycleFinderFindsACycle() {
        Map<String, Set<String>> g = new TreeMap<>();
        g.put("a", new TreeSet<>(Arrays.asList("b")));
        g.put("b", new TreeSet<>(Arrays.asList("c")));
        g.put("c", new TreeSet<>(Arrays.asList("a")));
        assertEquals(Arrays.asList("a", "b", "c", "a"), findCycle(g));
        g.put("c", new TreeSet<>());
        assertEquals(new ArrayList<String>(), findCycle(g));
    }

    @Test
    public void aReferenceUpwardIsReportedWithItsLine() throws IOException {
        Path dir = Files.createTempDirectory("layering");
        try {
            Path f = Files.createDirectories(dir.resolve("io/ibdxnet/transport")).resolve("Bad.java");
            Files.write(f, ("package io.ibdxnet.transport;\n\n// io.ibdxnet.nio.InComment is no use\n"
                    + "import io.ibdxnet.nio.NioTransport;\n"
                    + "class Bad { String s = \"io.ibdxnet.ib.InString\"; io.ibdxnet.core.Frame f; }\n")
                    .getBytes(StandardCharsets.UTF_8));
            List<Use> uses = scan(dir);
            assertEquals(2, uses.size());
            assertEquals("io.ibdxnet.nio", uses.get(0).to);
            assertTrue(uses.get(0).where, uses.get(0).where.endsWith("Bad.java:4"));
            assertEquals("io.ibdxnet.core", uses.get(1).to);
            assertTrue(uses.get(1).where, uses.get(1).where.endsWith("Bad.java:5"));
        } finally {
            try (Stream<Path> s = Files.walk(dir)) {
                s.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
            }
        }
    }

    /**
     * References between two files of one package that the file-level check
     * accepts although they close a cycle ("pkg.From -> To": the file From
     * names To). Each is a pair that is one thing split in two files; every
     * other file-level cycle fails {@link #theFilesOfEachPackageFormNoCycle}.
     */
    static final Set<String> FILE_CYCLES_ALLOWED = new TreeSet<>(Arrays.asList(
            // API: a request names its response type, a response the request it answers
            "io.ibdxnet.Response -> Request",
            // API: the sealed exporter permits its in-place subclass
            "io.ibdxnet.MessageExporter -> RingExporter",
            // API: the key table reads and writes the configuration's fields
            "io.ibdxnet.ConfigKey -> DXNetConfig",
            // the demo's request/response pair, as the API's
            "io.ibdxnet.app.BytesResponse -> BytesRequest",
            // the native binding starts its log drain when it loads; the drain calls the binding
            "io.ibdxnet.ib.NativeLog -> IbdxnetNative",
            // the library is loaded only by the binding's initialiser (JNI_OnLoad initialises that class to
            // register its natives), so loading from elsewhere goes through it
            "io.ibdxnet.ib.NativeLibrary -> IbdxnetNative",
            // the receive path's message creation, split out of it: it fills the path's batches and refuses
            // a request with the path's NoReceiver (that class's name is what the requester reads)
            "io.ibdxnet.internal.MessageCreation -> IncomingPath",
            // the transport's resending after a connection ended, split out of the transport
            "io.ibdxnet.ib.IbRetirement -> IbTransport",
            // the native threads' up-calls, split out of the transport: they work on its connections
            "io.ibdxnet.ib.IbEngineThreads -> IbTransport",
            // a channel carries its handshake's state; the handshake works on the channel
            "io.ibdxnet.nio.NioHandshake -> NioChannel",
            // a reserved record knows the connection it was reserved in, to publish there
            "io.ibdxnet.transport.RingRecord -> RingConnection"));

    @Test
    public void theFilesOfEachPackageFormNoCycle() throws IOException {
        List<Use> refs = scanFiles(Paths.get("java/src/main/java"), Paths.get("java/src/main/java22"));
        Map<String, Set<String>> graph = new TreeMap<>();
        Map<String, String> where = new TreeMap<>();
        Set<String> allowedSeen = new TreeSet<>();
        for (Use u : refs) {
            String edge = u.from + " -> " + u.to.substring(u.to.lastIndexOf('.') + 1);
            if (FILE_CYCLES_ALLOWED.contains(edge)) {
                allowedSeen.add(edge);
                continue;
            }
            graph.computeIfAbsent(u.from, k -> new TreeSet<>()).add(u.to);
            where.putIfAbsent(u.from + " " + u.to, u.where);
        }
        List<String> cycle = findCycle(graph);
        List<String> steps = new ArrayList<>();
        for (int i = 0; i + 1 < cycle.size(); i++) {
            steps.add(where.get(cycle.get(i) + " " + cycle.get(i + 1)) + ": " + simple(cycle.get(i)) + " names "
                    + simple(cycle.get(i + 1)));
        }
        assertTrue("files of one package that name each other in a cycle (break it, or allow it in "
                + "LayeringTest.FILE_CYCLES_ALLOWED with the reason):\n" + String.join("\n", steps), cycle.isEmpty());
        Set<String> stale = new TreeSet<>(FILE_CYCLES_ALLOWED);
        stale.removeAll(allowedSeen);
        assertTrue("allowed file references that no longer exist (remove them): " + stale, stale.isEmpty());
        assertTrue("the scan saw the code: " + graph.keySet(), graph.containsKey("io.ibdxnet.nio.NioTransport"));
    }

    @Test
    public void aFileCycleIsReportedWithItsLines() throws IOException {
        Path dir = Files.createTempDirectory("layering-files");
        try {
            Path p = Files.createDirectories(dir.resolve("io/ibdxnet/core"));
            Files.write(p.resolve("A.java"), "package io.ibdxnet.core;\n\nclass A {\n    B b; // C c\n}\n"
                    .getBytes(StandardCharsets.UTF_8));
            Files.write(p.resolve("B.java"), ("package io.ibdxnet.core;\nclass B {\n    String s = \"A\";\n    static A a() {\n"
                    + "        return null;\n    }\n    AB notA;\n}\n").getBytes(StandardCharsets.UTF_8));
            List<Use> refs = scanFiles(dir);
            assertEquals(2, refs.size());
            assertEquals("io.ibdxnet.core.A", refs.get(0).from);
            assertEquals("io.ibdxnet.core.B", refs.get(0).to);
            assertTrue(refs.get(0).where, refs.get(0).where.endsWith("A.java:4"));
            assertEquals("io.ibdxnet.core.A", refs.get(1).to);
            assertTrue(refs.get(1).where, refs.get(1).where.endsWith("B.java:4"));
            Map<String, Set<String>> g = new TreeMap<>();
            for (Use u : refs) {
                g.computeIfAbsent(u.from, k -> new TreeSet<>()).add(u.to);
            }
            assertEquals(Arrays.asList("io.ibdxnet.core.A", "io.ibdxnet.core.B", "io.ibdxnet.core.A"), findCycle(g));
        } finally {
            try (Stream<Path> s = Files.walk(dir)) {
                s.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
            }
        }
    }

    private static String simple(String file) {
        return file.substring(file.lastIndexOf('.') + 1);
    }

    /**
     * The references between the files (top-level classes) of one package
     * below {@code roots}: a file naming another of its package, by its
     * simple name outside comments and strings; one per pair, at the first
     * line. A file of the multi-release tree counts as its base version.
     */
    static List<Use> scanFiles(Path... roots) throws IOException {
        Map<String, List<Path>> byPackage = new TreeMap<>();
        List<Path> rootOf = new ArrayList<>();
        for (Path root : roots) {
            if (!Files.isDirectory(root)) {
                continue;
            }
            try (Stream<Path> files = Files.walk(root)) {
                for (Path f : (Iterable<Path>) files.filter(p -> p.toString().endsWith(".java")).sorted()::iterator) {
                    String name = f.getFileName().toString();
                    if (name.equals("package-info.java") || name.equals("module-info.java")) {
                        continue;
                    }
                    String rel = root.relativize(f.getParent()).toString().replace('\\', '/').replace('/', '.');
                    byPackage.computeIfAbsent(rel, k -> new ArrayList<>()).add(f);
                }
            }
        }
        List<Use> refs = new ArrayList<>();
        for (Map.Entry<String, List<Path>> e : byPackage.entrySet()) {
            Set<String> names = new TreeSet<>();
            for (Path f : e.getValue()) {
                names.add(f.getFileName().toString().replace(".java", ""));
            }
            Set<String> once = new HashSet<>();
            for (Path f : e.getValue()) {
                String self = f.getFileName().toString().replace(".java", "");
                String code = stripCommentsAndStrings(new String(Files.readAllBytes(f), StandardCharsets.UTF_8));
                Matcher m = IDENTIFIER.matcher(code);
                while (m.find()) {
                    String name = m.group();
                    // x.Name is another class's member, unless x is this package
                    boolean qualified = m.start() > 0 && code.charAt(m.start() - 1) == '.'
                            && !code.startsWith(e.getKey() + ".", m.start() - e.getKey().length() - 1);
                    if (name.equals(self) || qualified || !names.contains(name) || !once.add(self + " " + name)) {
                        continue;
                    }
                    int line = 1 + (int) code.substring(0, m.start()).chars().filter(c -> c == '\n').count();
                    refs.add(new Use(e.getKey() + "." + self, e.getKey() + "." + name, f + ":" + line));
                }
            }
        }
        return refs;
    }

    private static final Pattern IDENTIFIER = Pattern.compile("\\b[A-Z][A-Za-z0-9_]*\\b");

    @Test
    public void everyTestClassHasATimeout() throws IOException {
        List<String> missing = new ArrayList<>();
        try (Stream<Path> files = Files.walk(Paths.get("java/src/test/java"))) {
            for (Path f : (Iterable<Path>) files.filter(p -> p.toString().endsWith(".java"))::iterator) {
                String src = new String(Files.readAllBytes(f), StandardCharsets.UTF_8);
                if (src.contains("@Test") && !src.contains("org.junit.rules.Timeout")) {
                    missing.add(f.toString());
                }
            }
        }
        assertTrue("test classes without a Timeout rule (a hung join would hang CI): " + missing, missing.isEmpty());
    }

    /** The uses of our packages in the sources below {@code roots} (missing roots are skipped). */
    static List<Use> scan(Path... roots) throws IOException {
        List<Use> uses = new ArrayList<>();
        for (Path root : roots) {
            if (!Files.isDirectory(root)) {
                continue;
            }
            try (Stream<Path> files = Files.walk(root)) {
                files.filter(p -> p.toString().endsWith(".java")).sorted().forEach(f -> {
                    try {
                        scanFile(root, f, uses);
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                });
            }
        }
        return uses;
    }

    private static void scanFile(Path root, Path f, List<Use> uses) throws IOException {
        String rel = root.relativize(f).toString().replace('\\', '/');
        String pkg = rel.contains("/") ? rel.substring(0, rel.lastIndexOf('/')).replace('/', '.') : "";
        String file = pkg + "." + rel.substring(rel.lastIndexOf('/') + 1).replace(".java", "");
        String self = FILE_NODES.contains(file) ? file : FACADE_PARTS.contains(file) ? FACADE : pkg;
        String code = stripCommentsAndStrings(new String(Files.readAllBytes(f), StandardCharsets.UTF_8));
        Matcher m = REFERENCE.matcher(code);
        Set<String> once = new HashSet<>();
        while (m.find()) {
            String target = ROOT + m.group(1);
            if (FILE_NODES.contains(target + "." + m.group(2))) {
                target = target + "." + m.group(2);
            }
            if (target.equals(self) || target.equals(pkg) && self.equals(pkg)) {
                continue;
            }
            int line = 1 + (int) code.substring(0, m.start()).chars().filter(c -> c == '\n').count();
            if (once.add(target + "@" + line)) {
                uses.add(new Use(self, target, root + "/" + rel + ":" + line));
            }
        }
    }

    /** {@code src} with comments and string/char literals blanked (line breaks kept, so line numbers hold). */
    static String stripCommentsAndStrings(String src) {
        StringBuilder out = new StringBuilder(src.length());
        int i = 0;
        while (i < src.length()) {
            char c = src.charAt(i);
            if (src.startsWith("//", i)) {
                while (i < src.length() && src.charAt(i) != '\n') {
                    i++;
                }
            } else if (src.startsWith("/*", i)) {
                int end = src.indexOf("*/", i + 2);
                end = end < 0 ? src.length() : end + 2;
                blankKeepingLines(src, i, end, out);
                i = end;
            } else if (c == '"' || c == '\'') {
                int j = i + 1;
                while (j < src.length() && src.charAt(j) != c) {
                    j += src.charAt(j) == '\\' ? 2 : 1;
                }
                int end = Math.min(j + 1, src.length());
                blankKeepingLines(src, i, end, out);
                i = end;
            } else {
                out.append(c);
                i++;
            }
        }
        return out.toString();
    }

    private static void blankKeepingLines(String src, int from, int to, StringBuilder out) {
        for (int k = from; k < to; k++) {
            out.append(src.charAt(k) == '\n' ? '\n' : ' ');
        }
    }

    /** A cycle in {@code graph} as a path that ends where it starts, or an empty list. */
    static List<String> findCycle(Map<String, Set<String>> graph) {
        Set<String> done = new HashSet<>();
        for (String start : graph.keySet()) {
            List<String> found = visit(start, graph, new LinkedHashSet<>(), done);
            if (!found.isEmpty()) {
                return found;
            }
        }
        return new ArrayList<>();
    }

    private static List<String> visit(String node, Map<String, Set<String>> graph, LinkedHashSet<String> path,
            Set<String> done) {
        if (path.contains(node)) {
            List<String> cycle = new ArrayList<>(path);
            cycle = new ArrayList<>(cycle.subList(cycle.indexOf(node), cycle.size()));
            cycle.add(node);
            return cycle;
        }
        if (!done.add(node)) {
            return new ArrayList<>();
        }
        path.add(node);
        for (String next : graph.getOrDefault(node, new TreeSet<>())) {
            List<String> found = visit(next, graph, path, done);
            if (!found.isEmpty()) {
                return found;
            }
        }
        path.remove(node);
        return new ArrayList<>();
    }
}
