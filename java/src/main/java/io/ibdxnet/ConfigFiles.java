package io.ibdxnet;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/** A configuration file's entries as flat keys: JSON, or {@code key=value} lines ({@code DXNetConfig.load}). */
final class ConfigFiles {
    private ConfigFiles() {
    }

    /** JSON if the name ends in {@code .json}, else key=value lines. */
    static Map<String, String> read(Path file) throws IOException {
        return file.getFileName().toString().endsWith(".json") ? readJson(file) : readProperties(file);
    }

    /** The file's entries as flat keys ({@code node.<id>}, {@code native.<key>}). */
    private static Map<String, String> readJson(Path file) throws IOException {
        Map<String, String> out = new LinkedHashMap<>();
        try (Reader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            com.google.gson.JsonElement parsed = com.google.gson.JsonParser.parseReader(r);
            if (!parsed.isJsonObject()) {
                throw new IllegalArgumentException(file + ": not a JSON object");
            }
            for (Map.Entry<String, com.google.gson.JsonElement> e : parsed.getAsJsonObject().entrySet()) {
                String key = e.getKey();
                if (key.equals("nodes") || key.equals("native")) {
                    if (!e.getValue().isJsonObject()) {
                        throw new IllegalArgumentException(file + ": " + key + " is not a JSON object");
                    }
                    String prefix = key.equals("nodes") ? "node." : "native.";
                    for (Map.Entry<String, com.google.gson.JsonElement> inner : e.getValue().getAsJsonObject().entrySet()) {
                        out.put(prefix + inner.getKey(), jsonScalar(file, prefix + inner.getKey(), inner.getValue()));
                    }
                } else {
                    out.put(key, jsonScalar(file, key, e.getValue()));
                }
            }
        } catch (com.google.gson.JsonParseException e) {
            throw new IllegalArgumentException(file + ": not a JSON object: " + e.getMessage(), e);
        }
        return out;
    }

    private static String jsonScalar(Path file, String key, com.google.gson.JsonElement v) {
        if (v.isJsonNull()) {
            return "";
        }
        if (!v.isJsonPrimitive()) {
            throw new IllegalArgumentException(file + ": " + key + " = " + v + ": not a string, number or boolean");
        }
        return v.getAsString();
    }

    private static Map<String, String> readProperties(Path file) throws IOException {
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            p.load(r);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(file + ": " + e.getMessage(), e);
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (String key : p.stringPropertyNames()) {
            out.put(key, p.getProperty(key));
        }
        return out;
    }
}
