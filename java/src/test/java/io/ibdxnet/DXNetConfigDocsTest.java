package io.ibdxnet;

import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The text generated from {@link DXNetConfig#KEYS}: the javadoc of
 * DXNetConfig's fields and the key table in docs/configuration.md
 * (IBDXNET_UPDATE_README=1 rewrites both).
 */
public class DXNetConfigDocsTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    /**
     * Every key's field in DXNetConfig.java carries the javadoc {@link #fieldDoc}
     * generates from {@link DXNetConfig#KEYS} (meaning, default, range: the
     * javadoc describes each field, the key table stays their one source);
     * IBDXNET_UPDATE_README=1 rewrites them.
     */
    @Test
    public void fieldJavadocIsGeneratedFromKeys() throws Exception {
        Path source = Paths.get("java/src/main/java/io/ibdxnet/DXNetConfig.java").toAbsolutePath();
        String text = new String(Files.readAllBytes(source), StandardCharsets.UTF_8);
        String updated = text;
        List<String> wrong = new java.util.ArrayList<>();
        for (ConfigKey k : DXNetConfig.KEYS) {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile(
                    "(?m)^((?:    /\\*\\*\\n(?:     \\*.*\\n)*?     \\*/\\n)|(?:    /\\*\\*.*\\*/\\n))?(    public \\w+ "
                            + k.name + ";\\n)").matcher(updated);
            assertTrue("no field for key " + k.name, m.find());
            String want = fieldDoc(k);
            if (!want.equals(m.group(1))) {
                wrong.add(k.name);
                updated = updated.substring(0, m.start()) + want + m.group(2) + updated.substring(m.end());
            }
        }
        if (!wrong.isEmpty()) {
            if (System.getenv("IBDXNET_UPDATE_README") != null) {
                Files.write(source, updated.getBytes(StandardCharsets.UTF_8));
                return;
            }
            fail("the javadoc of DXNetConfig's fields " + wrong + " differs from DXNetConfig.KEYS; rerun with "
                    + "IBDXNET_UPDATE_README=1 to regenerate");
        }
    }

    /** The javadoc of key {@code k}'s field: its meaning, default and range, Markdown code as {@code {@code}}. */
    static String fieldDoc(ConfigKey k) {
        String doc = k.doc.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
        doc = doc.replaceAll("`([^`]*)`", "{@code $1}");
        StringBuilder text = new StringBuilder("Key {@code ").append(k.name).append("}: ").append(doc);
        if (!doc.endsWith(".")) {
            text.append('.');
        }
        if (k.nativeKey != null) {
            text.append(" Sets the native engine's {@code ").append(k.nativeKey).append("}.");
        }
        text.append(" Type: ").append(k.type.replace("<", "&lt;").replace(">", "&gt;")).append("; default: ")
                .append(k.defaultText.isEmpty() ? "none" : "{@code " + k.defaultText + "}");
        if (!k.range.isEmpty()) {
            text.append("; range: ").append(k.range.replace("<", "&lt;").replace(">", "&gt;"));
        }
        text.append('.');
        StringBuilder out = new StringBuilder("    /**\n");
        StringBuilder line = new StringBuilder("     *");
        // Words, each {@code …} with what follows it as one word (never split over lines).
        java.util.regex.Matcher words = java.util.regex.Pattern.compile("(?:\\{@code [^}]*\\}|\\S)+").matcher(text);
        while (words.find()) {
            String word = words.group();
            if (line.length() + 1 + word.length() > 100 && line.length() > 6) {
                out.append(line).append('\n');
                line = new StringBuilder("     *");
            }
            line.append(' ').append(word);
        }
        return out.append(line).append("\n     */\n").toString();
    }

    /** docs/configuration.md's table of these keys is {@link DXNetConfig#markdownTable}; IBDXNET_UPDATE_README=1 rewrites it. */
    @Test
    public void docTableIsGeneratedFromKeys() throws Exception {
        Path doc = Paths.get("docs/configuration.md").toAbsolutePath();
        String text = new String(Files.readAllBytes(doc), StandardCharsets.UTF_8);
        String begin = "<!-- java-config-keys: begin -->\n";
        String end = "<!-- java-config-keys: end -->";
        int start = text.indexOf(begin);
        assertTrue("docs/configuration.md has the begin marker", start >= 0);
        start += begin.length();
        int stop = text.indexOf(end, start);
        assertTrue("docs/configuration.md has the end marker", stop >= 0);
        String want = DXNetConfig.markdownTable();
        if (!text.substring(start, stop).equals(want)) {
            if (System.getenv("IBDXNET_UPDATE_README") != null) {
                Files.write(doc, (text.substring(0, start) + want + text.substring(stop)).getBytes(StandardCharsets.UTF_8));
                return;
            }
            fail("docs/configuration.md's Java configuration table differs from DXNetConfig.KEYS; rerun with "
                    + "IBDXNET_UPDATE_README=1 to regenerate:\n" + want);
        }
    }
}
