package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The documents name only files that exist: every relative Markdown link, and
 * every path in backquotes that starts with one of the repository's top-level
 * folders (or {@code results/} in bench/, meaning bench/results/). A renamed
 * script, test source or results file fails this test until its mention follows.
 * A test class named in backquotes ({@code FooTest}, or {@code FooTest.method})
 * must exist as a source file under java/ or compat/, with that method in it.
 * A measured figure (a latency in µs, a rate in msg/s or MB/s, a cost in
 * ns/msg) stands in a section (or under a heading) that names its raw file:
 * a {@code results/} file or bench/HISTORY.md, or a paper it comes from.
 */
public class DocumentReferencesTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s#]+)(#[^)]*)?\\)");
    private static final Pattern CODE_PATH = Pattern.compile(
            "`((?:bench|tools|java|native|compat|docs|examples|gradle|results)/[A-Za-z0-9_./-]+)`");

    private static final Pattern TEST_CLASS = Pattern.compile("`([A-Z][A-Za-z0-9]*Test)(?:\\.([a-zA-Z_][A-Za-z0-9_]*))?`");

    private static final Pattern FIGURE = Pattern.compile(
            "\\d[\\d ,.]*\\s?(?:µs|us\\b|msg/s|MB/s|GB/s|Gbit/s|ns/msg|M msg/s|k msg/s)");
    private static final Pattern RAW_SOURCE = Pattern.compile("results/[\\w.-]+|HISTORY\\.md|papers?/|paper's|the paper");
    /** Constants of a specification, not measurements (the IB ACK timeout unit). */
    private static final String[] SPEC_CONSTANTS = {"4.096 µs"};

    /**
     * The headings of {@code text} whose section has a measured figure that
     * neither it nor a heading above it backs with a raw file (fenced code
     * is part of its section; a {@code #} in it is no heading).
     */
    static List<String> figuresWithoutRawFile(String text) {
        List<String> bad = new ArrayList<>();
        String[] lines = text.split("\n", -1);
        // Per heading level 0..6: does that section (own text, up to its first subheading) cite a raw file?
        boolean[] cites = new boolean[7];
        String heading = "(top)";
        int level = 0;
        StringBuilder own = new StringBuilder();
        boolean fenced = false;
        for (int i = 0; i <= lines.length; i++) {
            String line = i < lines.length ? lines[i] : null;
            if (line != null && line.startsWith("```")) {
                fenced = !fenced;
            }
            boolean isHeading = line != null && !fenced && line.matches("#{1,6} .*");
            if (line == null || isHeading) {
                String t = own.toString();
                for (String c : SPEC_CONSTANTS) {
                    t = t.replace(c, "");
                }
                cites[level] = RAW_SOURCE.matcher(t).find();
                boolean backed = false;
                for (int l = 0; l <= level; l++) {
                    backed |= cites[l];
                }
                if (FIGURE.matcher(t).find() && !backed) {
                    bad.add(heading);
                }
                if (line == null) {
                    break;
                }
                level = line.indexOf(' ');
                heading = line;
                for (int l = level; l < cites.length; l++) {
                    cites[l] = false;
                }
                own.setLength(0);
            }
            own.append(line).append('\n');
        }
        return bad;
    }

    /** The documents a reader is sent to: the root's, docs/, bench/ and the tools' READMEs. */
    static List<Path> documents() throws IOException {
        List<Path> docs = new ArrayList<>();
        for (String dir : new String[] {".", "docs", "bench", "tools/rxe-vm", "tools/cluster-vm", "compat/upstream"}) {
            try (Stream<Path> s = Files.list(Paths.get(dir))) {
                s.filter(p -> p.toString().endsWith(".md")).sorted().forEach(docs::add);
            }
        }
        return docs;
    }

    /** What in {@code text} (a document in {@code dir}) names a file that does not exist. */
    static List<String> missing(Path dir, String text) {
        List<String> gone = new ArrayList<>();
        Matcher l = LINK.matcher(text);
        while (l.find()) {
            String target = l.group(1);
            if (target.contains("://") || target.startsWith("mailto:")) {
                continue;
            }
            if (!Files.exists(dir.resolve(target))) {
                gone.add("link " + target);
            }
        }
        Matcher c = CODE_PATH.matcher(text);
        while (c.find()) {
            String p = c.group(1);
            if (p.contains("XXX") || p.endsWith("/") && p.length() < 3) {
                continue;
            }
            // bench/README.md and its history say results/… for bench/results/….
            Path resolved = p.startsWith("results/") ? Paths.get("bench").resolve(p) : Paths.get(p);
            if (!Files.exists(resolved) && !Files.exists(dir.resolve(p))) {
                gone.add("path " + p);
            }
        }
        Matcher t = TEST_CLASS.matcher(text);
        while (t.find()) {
            String source = testSource(t.group(1));
            if (source == null) {
                gone.add("test class " + t.group(1));
            } else if (t.group(2) != null && !source.contains(" " + t.group(2) + "(")) {
                gone.add("test method " + t.group(1) + "." + t.group(2));
            }
        }
        return gone;
    }

    /** The text of {@code name}.java under java/ or compat/, or null. */
    static String testSource(String name) {
        for (String root : new String[] {"java", "compat"}) {
            try (Stream<Path> s = Files.walk(Paths.get(root))) {
                Path found = s.filter(p -> p.getFileName().toString().equals(name + ".java")).findFirst().orElse(null);
                if (found != null) {
                    return new String(Files.readAllBytes(found), StandardCharsets.UTF_8);
                }
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        return null;
    }

    @Test
    public void everyFileADocumentNamesExists() throws IOException {
        List<Path> docs = documents();
        assertTrue("found the documents: " + docs, docs.size() >= 15);
        StringBuilder problems = new StringBuilder();
        for (Path doc : docs) {
            String text = new String(Files.readAllBytes(doc), StandardCharsets.UTF_8);
            Path dir = doc.getParent() == null ? Paths.get(".") : doc.getParent();
            for (String m : missing(dir, text)) {
                problems.append(doc).append(": ").append(m).append('\n');
            }
        }
        assertEquals("documents naming files that do not exist", "", problems.toString());
    }

    /** The check itself: a link and a path to nothing are found, existing ones are not. */
    @Test
    public void aMissingFileIsFoundAndAnExistingOneIsNot() {
        Path root = Paths.get(".");
        assertEquals(List.of("link docs/nowhere.md", "path bench/results/1999-01-01-none.txt"),
                missing(root, "see [here](docs/nowhere.md) and `bench/results/1999-01-01-none.txt`"));
        assertEquals(List.of(), missing(root, "see [the map](ARCHITECTURE.md#x), [web](https://example.org) and `tools/rxe-vm/run-in-rxe-vm.sh`"));
        assertEquals(List.of("path results/1999-01-01-none.txt"), missing(root, "(`results/1999-01-01-none.txt`)"));
    }

    /** A test class or method that does not exist is found; existing ones are not. */
    @Test
    public void aMissingTestClassOrMethodIsFound() {
        Path root = Paths.get(".");
        assertEquals(List.of("test class NoSuchThingTest", "test method DocumentReferencesTest.noSuchMethod"),
                missing(root, "`NoSuchThingTest` and `DocumentReferencesTest.noSuchMethod`"));
        assertEquals(List.of(), missing(root, "`DocumentReferencesTest` and `DocumentReferencesTest.aMissingTestClassOrMethodIsFound`"));
    }

    @Test
    public void everyMeasuredFigureNamesItsRawFile() throws IOException {
        StringBuilder problems = new StringBuilder();
        for (Path doc : documents()) {
            for (String h : figuresWithoutRawFile(new String(Files.readAllBytes(doc), StandardCharsets.UTF_8))) {
                problems.append(doc).append(": ").append(h).append('\n');
            }
        }
        assertEquals("sections with a measured figure and no raw file (results/..., bench/HISTORY.md)", "",
                problems.toString());
    }

    /** The check itself: a figure without a raw file is found; one under a citing heading, or a constant, is not. */
    @Test
    public void aFigureWithoutItsRawFileIsFound() {
        assertEquals(List.of("## B"), figuresWithoutRawFile("# A\nintro\n## B\n12 µs\n"));
        assertEquals(List.of(), figuresWithoutRawFile("# A\nsee `results/x.txt`\n## B\n12 µs\n"));
        assertEquals(List.of(), figuresWithoutRawFile("## B\n12 µs (results/x.txt)\n```\n# not a heading\n3 MB/s\n```\n"));
        assertEquals(List.of("## C"), figuresWithoutRawFile("## B\nresults/x.txt\n## C\n3 msg/s\n"));
        assertEquals(List.of(), figuresWithoutRawFile("## T\n4.096 µs × 2^value\n"));
    }
}
