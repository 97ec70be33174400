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
 */
public class DocumentReferencesTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s#]+)(#[^)]*)?\\)");
    private static final Pattern CODE_PATH = Pattern.compile(
            "`((?:bench|tools|java|native|compat|docs|examples|gradle|results)/[A-Za-z0-9_./-]+)`");

    private static final Pattern TEST_CLASS = Pattern.compile("`([A-Z][A-Za-z0-9]*Test)(?:\\.([a-zA-Z_][A-Za-z0-9_]*))?`");

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
}
