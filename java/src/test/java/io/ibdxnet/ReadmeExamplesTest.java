package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * README.md and the documents in docs/ quote the examples project: each block
 * after an {@code <!-- excerpt: PATH -->} line must occur in PATH word for word,
 * and the example's configuration files must load. docs/getting-started.md
 * gives the Maven coordinates, docs/deployment.md the tested command lines.
 */
public class ReadmeExamplesTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private static final Pattern EXCERPT = Pattern.compile("<!-- excerpt: (\\S+) -->\\n```[a-z]*\\n(.*?)\\n```", Pattern.DOTALL);

    private static String read(String path) throws IOException {
        return new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8);
    }

    /** The documents that quote examples/: README.md and every file in docs/. */
    static java.util.List<String> documents() throws IOException {
        java.util.List<String> docs = new java.util.ArrayList<>();
        docs.add("README.md");
        try (java.util.stream.Stream<Path> s = Files.list(Paths.get("docs"))) {
            s.map(Path::toString).filter(p -> p.endsWith(".md")).sorted().forEach(docs::add);
        }
        return docs;
    }

    @Test
    public void everyExcerptInTheDocumentsIsInItsFile() throws IOException {
        int found = 0;
        for (String doc : documents()) {
            Matcher m = EXCERPT.matcher(read(doc));
            int here = 0;
            while (m.find()) {
                String file = read(m.group(1));
                assertTrue(doc + " quotes " + m.group(1) + " but the file no longer contains:\n" + m.group(2),
                        file.contains(m.group(2)));
                here++;
            }
            if (doc.equals("README.md")) {
                assertTrue("README.md has no excerpt of examples/ (its hello)", here >= 1);
            }
            found += here;
        }
        assertTrue("the documents have " + found + " excerpts of examples/, expected at least 5", found >= 5);
    }

    @Test
    public void theExampleDependsOnThisVersion() throws IOException {
        Matcher v = Pattern.compile("(?m)^version=(\\S+)$").matcher(read("gradle.properties"));
        assertTrue(v.find());
        assertTrue("examples/build.gradle must depend on io.ibdxnet:ibdxnet:" + v.group(1),
                read("examples/build.gradle").contains("compile 'io.ibdxnet:ibdxnet:" + v.group(1) + "'"));
        assertTrue(read("README.md").contains("io.ibdxnet:ibdxnet:" + v.group(1)));
        assertTrue(read("docs/getting-started.md").contains("implementation 'io.ibdxnet:ibdxnet:" + v.group(1) + "'"));
    }

    @Test
    public void theMavenSnippetNamesThisArtifact() throws IOException {
        String props = read("gradle.properties");
        Matcher g = Pattern.compile("(?m)^group=(\\S+)$").matcher(props);
        Matcher v = Pattern.compile("(?m)^version=(\\S+)$").matcher(props);
        assertTrue(g.find() && v.find());
        String snippet = "<dependency>\n    <groupId>" + g.group(1) + "</groupId>\n    <artifactId>ibdxnet</artifactId>\n"
                + "    <version>" + v.group(1) + "</version>\n</dependency>";
        assertTrue("docs/getting-started.md has no Maven snippet for " + g.group(1) + ":ibdxnet:" + v.group(1) + ":\n"
                + snippet, read("docs/getting-started.md").contains(snippet));
    }

    /** The command lines docs/deployment.md gives are the ones {@link ModulePathTest} runs (with the jar and gson by file name). */
    @Test
    public void theDocumentedCommandLinesAreTheTestedOnes() throws IOException {
        Matcher v = Pattern.compile("(?m)^version=(\\S+)$").matcher(read("gradle.properties"));
        assertTrue(v.find());
        String doc = read("docs/deployment.md");
        String jar = "ibdxnet-" + v.group(1) + ".jar";
        for (java.util.List<String> cmd : java.util.Arrays.asList(
                ModulePathTest.modulePathCommand("java", jar, "gson-2.10.1.jar", "example", "nio"),
                ModulePathTest.classPathCommand("java", jar, "gson-2.10.1.jar", "example", "nio"))) {
            String line = String.join(" ", cmd);
            assertTrue("docs/deployment.md does not give the tested command line\n" + line, doc.contains("\n" + line + "\n"));
        }
        assertTrue("docs/deployment.md does not show the module descriptor ModulePathTest gives the example",
                doc.contains("```java\n" + ModulePathTest.EXAMPLE_MODULE_INFO + "```\n"));
    }

    @Test
    public void theTwoProcessConfigurationsLoad() throws IOException {
        for (String t : new String[] {"nio", "ib"}) {
            for (int id = 0; id < 2; id++) {
                Path p = Paths.get("examples", t + "-node" + id + ".properties");
                DXNetConfig c = DXNetConfig.load(p);
                c.validate();
                assertEquals(p.toString(), id, c.nodeId);
                assertEquals(p.toString(), t, c.transport);
                assertEquals(p.toString(), 2, c.nodes.size());
            }
        }
    }
}
