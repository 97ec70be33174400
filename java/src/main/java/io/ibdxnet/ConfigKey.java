package io.ibdxnet;

import java.util.List;
import java.util.function.BiConsumer;
import java.util.function.Function;

/**
 * One key of {@link DXNetConfig}: its name, type, default, range and meaning,
 * and how its value reaches the field. The table of all keys is
 * {@link DXNetConfig#KEYS}; files, validation and the README table read it.
 */
public final class ConfigKey {
    /** The key in files and in {@link DXNetConfig}'s field of the same name. */
    public final String name;
    /** What a value looks like. */
    public final String type;
    /** The default in the text form ("" for none). */
    public final String defaultText;
    /** The accepted values beyond the type ("" when the type says it all). */
    public final String range;
    /** What it means. */
    public final String doc;
    /** The native engine key this key also sets (transport {@code ib}), or null. */
    public final String nativeKey;

    private final Function<String, Object> parse;
    private final Function<Object, String> check;
    private final Function<DXNetConfig, Object> get;
    private final BiConsumer<DXNetConfig, Object> set;

    @SuppressWarnings("unchecked")
    private <T> ConfigKey(String name, String type, String defaultText, String range, String doc, String nativeKey,
            Function<String, T> parse, Function<T, String> check, Function<DXNetConfig, T> get,
            BiConsumer<DXNetConfig, T> set) {
        this.name = name;
        this.type = type;
        this.defaultText = defaultText;
        this.range = range;
        this.doc = doc;
        this.nativeKey = nativeKey;
        this.parse = parse::apply;
        this.check = v -> check.apply((T) v);
        this.get = get::apply;
        this.set = (c, v) -> set.accept(c, (T) v);
    }

    /** Sets the field from the text form; the message names the key and the value. */
    void set(DXNetConfig c, String text) {
        String v = text.trim();
        Object value;
        try {
            value = parse.apply(v);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(name + " = '" + v + "': " + e.getMessage());
        }
        set.accept(c, value);
    }

    /** The field's value in the text form ("" for none). */
    String text(DXNetConfig c) {
        Object v = get.apply(c);
        return v == null ? "" : v.toString();
    }

    /** Checks the field's range; the message names the key and the value. */
    void check(DXNetConfig c) {
        Object v = get.apply(c);
        String why = check.apply(v);
        if (why != null) {
            throw new IllegalArgumentException(name + " = " + (v instanceof String ? "'" + v + "'" : v) + " " + why);
        }
    }

    /** True while the field holds its default. */
    boolean isDefault(DXNetConfig c) {
        return text(c).equals(defaultText);
    }

    // ---- factories, one per value type ----

    static ConfigKey ofInt(String name, int dflt, long min, long max, String doc, Function<DXNetConfig, Integer> get,
            BiConsumer<DXNetConfig, Integer> set) {
        return new ConfigKey(name, "integer", Integer.toString(dflt), rangeText(min, max), doc, null,
                v -> (int) parseLong(v, Integer.MIN_VALUE, Integer.MAX_VALUE), v -> inRange(v, min, max, false), get, set);
    }

    static ConfigKey ofPow2(String name, int dflt, long min, long max, String doc, Function<DXNetConfig, Integer> get,
            BiConsumer<DXNetConfig, Integer> set) {
        return new ConfigKey(name, "integer", Integer.toString(dflt), "a power of two in " + rangeText(min, max), doc,
                null, v -> (int) parseLong(v, Integer.MIN_VALUE, Integer.MAX_VALUE), v -> inRange(v, min, max, true), get,
                set);
    }

    static ConfigKey ofLong(String name, long dflt, long min, long max, String doc, Function<DXNetConfig, Long> get,
            BiConsumer<DXNetConfig, Long> set) {
        return new ConfigKey(name, "integer", Long.toString(dflt), rangeText(min, max), doc, null,
                v -> parseLong(v, Long.MIN_VALUE, Long.MAX_VALUE), v -> inRange(v, min, max, false), get, set);
    }

    /** A fraction in (0, 1]. */
    static ConfigKey ofFraction(String name, double dflt, String doc, Function<DXNetConfig, Double> get,
            BiConsumer<DXNetConfig, Double> set) {
        return new ConfigKey(name, "number", Double.toString(dflt), "(0, 1]", doc, null, ConfigKey::parseDouble,
                v -> v > 0 && v <= 1 ? null : "must be in (0, 1]", get, set);
    }

    static ConfigKey ofBoolean(String name, boolean dflt, String doc, Function<DXNetConfig, Boolean> get,
            BiConsumer<DXNetConfig, Boolean> set) {
        return new ConfigKey(name, "true or false", Boolean.toString(dflt), "", doc, null, v -> {
            if (v.equals("true") || v.equals("false")) {
                return Boolean.parseBoolean(v);
            }
            throw new IllegalArgumentException("not true or false");
        }, v -> null, get, set);
    }

    static ConfigKey ofChoice(String name, String dflt, List<String> choices, String doc,
            Function<DXNetConfig, String> get, BiConsumer<DXNetConfig, String> set) {
        return new ConfigKey(name, String.join(", ", choices), dflt, "", doc, null, v -> v,
                v -> choices.contains(v) ? null : "is not one of " + choices, get, set);
    }

    /** host:port, or empty (null) for none. */
    static ConfigKey ofAddress(String name, String doc, Function<DXNetConfig, String> get,
            BiConsumer<DXNetConfig, String> set) {
        return new ConfigKey(name, "host:port or empty", "", "", doc, null, v -> v.isEmpty() ? null : v,
                v -> v == null ? null : addressError(v), get, set);
    }

    /** A file name, or empty (null) for none. */
    static ConfigKey ofPath(String name, String doc, Function<DXNetConfig, String> get,
            BiConsumer<DXNetConfig, String> set) {
        return new ConfigKey(name, "path or empty", "", "", doc, null, v -> v.isEmpty() ? null : v, v -> null, get, set);
    }

    /** This key, also setting the native engine key {@code nativeKey}. */
    ConfigKey setsNative(String nativeKey) {
        return new ConfigKey(name, type, defaultText, range, doc, nativeKey, parse, check::apply, get::apply,
                set::accept);
    }

    // ---- parsing and checks ----

    private static long parseLong(String v, long min, long max) {
        long n;
        try {
            n = Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not an integer");
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException("too large for its type (" + min + " to " + max + ")");
        }
        return n;
    }

    private static double parseDouble(String v) {
        try {
            return Double.parseDouble(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a number");
        }
    }

    private static String inRange(Number value, long min, long max, boolean pow2) {
        long v = value.longValue();
        if (v < min || v > max) {
            return "must be " + (pow2 ? "a power of two " : "") + "in " + rangeText(min, max);
        }
        if (pow2 && Long.bitCount(v) != 1) {
            return "must be a power of two in " + rangeText(min, max);
        }
        return null;
    }

    private static String rangeText(long min, long max) {
        return "[" + min + ", " + (max == Integer.MAX_VALUE ? "2^31-1" : max == Long.MAX_VALUE ? "2^63-1" : max) + "]";
    }

    /** Null if {@code v} is host:port with a port in [0, 65535], else why not. */
    static String addressError(String v) {
        int colon = v.lastIndexOf(':');
        if (colon < 1) {
            return "is not host:port";
        }
        try {
            int port = Integer.parseInt(v.substring(colon + 1));
            return port >= 0 && port <= 65535 ? null : "has a port outside [0, 65535]";
        } catch (NumberFormatException e) {
            return "is not host:port (the port is not a number)";
        }
    }

    /** Edit distance, for suggesting the nearest known key. */
    static int distance(String a, String b) {
        int[] row = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            row[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            int prev = row[0];
            row[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int cur = row[j];
                int same = Character.toLowerCase(a.charAt(i - 1)) == Character.toLowerCase(b.charAt(j - 1)) ? 0 : 1;
                row[j] = Math.min(prev + same, Math.min(row[j - 1] + 1, cur + 1));
                prev = cur;
            }
        }
        return row[b.length()];
    }
}
