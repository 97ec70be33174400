package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Member;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The API check of the build: the public and protected signatures of
 * {@code io.ibdxnet} are recorded per version in {@code java/api/<version>.api}.
 * The recording of the version in {@code gradle.properties} must be the API
 * as built (a change is recorded with {@code IBDXNET_UPDATE_README=1}); a
 * signature that the previous version's recording has and this one lacks is
 * a break, and a break must be announced: a new minor version before 1.0.0
 * (major after) and a "Breaking changes" section for it in CHANGELOG.md.
 */
public class ApiCompatibilityTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    private static final Path DIR = Paths.get("java/api");

    /** The API as built: one line per public type and per public or protected member, sorted. */
    static List<String> signatures() throws ClassNotFoundException {
        TreeSet<String> out = new TreeSet<>();
        for (Class<?> c : ApiSurfaceTest.apiClasses()) {
            // sealed/non-sealed: JDK 17's toGenericString leaves them out, later JDKs print them.
            String type = c.toGenericString().replace("non-sealed ", "").replace("sealed ", "");
            out.add(c.getName() + ": " + type + supertypes(c));
            List<Member> members = new ArrayList<>();
            members.addAll(Arrays.asList(c.getDeclaredConstructors()));
            members.addAll(Arrays.asList(c.getDeclaredMethods()));
            members.addAll(Arrays.asList(c.getDeclaredFields()));
            for (Member m : members) {
                int mod = m.getModifiers();
                boolean visible = Modifier.isPublic(mod) || (Modifier.isProtected(mod) && !Modifier.isFinal(c.getModifiers()));
                if (visible && !m.isSynthetic()) {
                    out.add(c.getName() + ": " + generic(m));
                }
            }
        }
        return new ArrayList<>(out);
    }

    private static String supertypes(Class<?> c) {
        StringBuilder s = new StringBuilder();
        if (c.getGenericSuperclass() != null && c.getSuperclass() != Object.class && !c.isEnum()) {
            s.append(" extends ").append(c.getGenericSuperclass().getTypeName());
        }
        if (c.getGenericInterfaces().length > 0) {
            s.append(" implements ").append(Arrays.stream(c.getGenericInterfaces()).map(t -> t.getTypeName())
                    .sorted().collect(Collectors.joining(", ")));
        }
        return s.toString();
    }

    private static String generic(Member m) {
        if (m instanceof Method) {
            return ((Method) m).toGenericString();
        }
        if (m instanceof Constructor) {
            return ((Constructor<?>) m).toGenericString();
        }
        return ((Field) m).toGenericString();
    }

    static String version() throws IOException {
        Properties p = new Properties();
        try (java.io.Reader r = Files.newBufferedReader(Paths.get("gradle.properties"), StandardCharsets.UTF_8)) {
            p.load(r);
        }
        return p.getProperty("version");
    }

    private static int[] parts(String version) {
        return Arrays.stream(version.split("[.-]")).limit(3).mapToInt(Integer::parseInt).toArray();
    }

    private static int compare(String a, String b) {
        int[] x = parts(a);
        int[] y = parts(b);
        for (int i = 0; i < 3; i++) {
            if (x[i] != y[i]) {
                return Integer.compare(x[i], y[i]);
            }
        }
        return 0;
    }

    /**
     * What is wrong with going from {@code previous} (recorded for
     * {@code previousVersion}) to {@code current} (version {@code version}),
     * given the changelog: an empty string when nothing.
     */
    static String unannouncedBreak(List<String> previous, String previousVersion, List<String> current, String version,
            String changelog) {
        List<String> removed = new ArrayList<>(previous);
        removed.removeAll(current);
        if (removed.isEmpty()) {
            return "";
        }
        StringBuilder why = new StringBuilder();
        int[] p = parts(previousVersion);
        int[] v = parts(version);
        boolean bumped = p[0] == 0 ? (v[0] > 0 || v[1] > p[1]) : v[0] > p[0];
        if (!bumped) {
            why.append("version ").append(version).append(" breaks ").append(previousVersion)
                    .append(" but is not a new ").append(p[0] == 0 ? "minor" : "major").append(" version; ");
        }
        // "## 0.3.0", "## 0.3.0 (unreleased)" or "## 0.3.0 — 2026-11-28" (./ibdxnet release).
        java.util.regex.Matcher head = java.util.regex.Pattern
                .compile("\n## " + java.util.regex.Pattern.quote(version) + "( [^\n]*)?\n").matcher(changelog);
        int at = head.find() ? head.start() : -1;
        int end = at < 0 ? -1 : changelog.indexOf("\n## ", at + 4);
        String section = at < 0 ? "" : changelog.substring(at, end < 0 ? changelog.length() : end);
        if (!section.contains("### Breaking changes")) {
            why.append("CHANGELOG.md has no \"### Breaking changes\" under \"## ").append(version).append("\"; ");
        }
        return why.length() == 0 ? "" : why + "removed or changed: " + removed;
    }

    private static List<String> read(Path f) throws IOException {
        return Files.readAllLines(f, StandardCharsets.UTF_8).stream().filter(l -> !l.startsWith("#") && !l.isEmpty())
                .collect(Collectors.toList());
    }

    @Test
    public void theRecordedApiOfThisVersionIsTheApiAsBuilt() throws Exception {
        String version = version();
        Path file = DIR.resolve(version + ".api");
        List<String> now = signatures();
        assertTrue("found the API: " + now.size() + " signatures", now.size() > 50);
        if ("1".equals(System.getenv("IBDXNET_UPDATE_README"))) {
            Files.createDirectories(DIR);
            List<String> lines = new ArrayList<>();
            lines.add("# The API of io.ibdxnet " + version + " (ApiCompatibilityTest; IBDXNET_UPDATE_README=1 records it)");
            lines.addAll(now);
            Files.write(file, lines, StandardCharsets.UTF_8);
        }
        assertTrue(file + " is missing: record the API of " + version + " with IBDXNET_UPDATE_README=1", Files.exists(file));
        List<String> recorded = read(file);
        List<String> gone = new ArrayList<>(recorded);
        gone.removeAll(now);
        List<String> added = new ArrayList<>(now);
        added.removeAll(recorded);
        assertTrue("the API differs from " + file + " (record it with IBDXNET_UPDATE_README=1, and say so in "
                + "CHANGELOG.md): gone " + gone + ", new " + added, gone.isEmpty() && added.isEmpty());
    }

    @Test
    public void aBreakWithThePreviousVersionIsAnnounced() throws Exception {
        String version = version();
        List<String> older = new ArrayList<>();
        try (java.util.stream.Stream<Path> files = Files.list(DIR)) {
            files.map(f -> f.getFileName().toString()).filter(n -> n.endsWith(".api"))
                    .map(n -> n.substring(0, n.length() - 4)).filter(v -> compare(v, version) < 0).forEach(older::add);
        }
        if (older.isEmpty()) {
            return; // the first recorded version: nothing to break
        }
        older.sort(ApiCompatibilityTest::compare);
        String previous = older.get(older.size() - 1);
        String changelog = new String(Files.readAllBytes(Paths.get("CHANGELOG.md")), StandardCharsets.UTF_8);
        assertEquals("", unannouncedBreak(read(DIR.resolve(previous + ".api")), previous, signatures(), version, changelog));
    }

    /** The rule itself, on made-up versions: a removed signature needs the version bump and the changelog section. */
    @Test
    public void anUnannouncedBreakIsNamed() {
        List<String> before = Arrays.asList("A: public void a()", "A: public void b()");
        List<String> after = Arrays.asList("A: public void a()", "A: public void c()");
        String announced = "# Changelog\n\n## 0.3.0\n\n### Breaking changes\n\n- b() is gone\n\n## 0.2.0\n";
        assertEquals("", unannouncedBreak(before, "0.2.0", after, "0.3.0", announced));
        assertEquals("additions break nothing", "", unannouncedBreak(before, "0.2.0",
                Arrays.asList("A: public void a()", "A: public void b()", "A: public void c()"), "0.2.1", ""));
        String patch = unannouncedBreak(before, "0.2.0", after, "0.2.1", announced);
        assertTrue(patch, patch.contains("not a new minor version") && patch.contains("A: public void b()"));
        String silent = unannouncedBreak(before, "0.2.0", after, "0.3.0", "# Changelog\n\n## 0.3.0\n\n### Added\n");
        assertTrue(silent, silent.contains("no \"### Breaking changes\""));
        assertEquals("an unreleased section counts", "", unannouncedBreak(before, "0.2.0", after, "0.3.0",
                "# Changelog\n\n## 0.3.0 (unreleased)\n\n### Breaking changes\n\n- b() is gone\n\n## 0.2.0 — 2026-11-28\n"));
        assertEquals("a dated section counts", "", unannouncedBreak(before, "0.2.0", after, "0.3.0",
                "# Changelog\n\n## 0.3.0 — 2026-12-01\n\n### Breaking changes\n\n- b() is gone\n"));
        assertTrue("0.3.01 is not 0.3.0", unannouncedBreak(before, "0.2.0", after, "0.3.0",
                "# Changelog\n\n## 0.3.01\n\n### Breaking changes\n").contains("no \"### Breaking changes\""));
        String major = unannouncedBreak(before, "1.4.0", after, "1.5.0", "\n## 1.5.0\n### Breaking changes\n");
        assertTrue(major, major.contains("not a new major version"));
    }

    @Test
    public void versionsCompareByNumber() {
        assertTrue(compare("0.10.0", "0.9.1") > 0);
        assertTrue(compare("0.2.0", "0.2.0") == 0);
        assertTrue(compare("1.0.0", "0.99.9") > 0);
    }
}
