package io.ibdxnet.ib;

import java.util.HashMap;
import java.util.Map;

/**
 * The layout of the structs shared with the native engine, as the native
 * library reports it: Java never hard-codes an offset. Flyweights look their
 * fields up here once, in their static initialisers, and check field sizes.
 */
public final class NativeLayout {
    /** One struct: size, alignment and fields (offset, size). */
    public static final class Struct {
        public final String name;
        public final int size;
        public final int align;
        private final Map<String, int[]> fields;

        Struct(String name, int size, int align, Map<String, int[]> fields) {
            this.name = name;
            this.size = size;
            this.align = align;
            this.fields = fields;
        }

        /** Offset of {@code field}, which must be {@code size} bytes wide. */
        public long offset(String field, int size) {
            int[] f = fields.get(field);
            if (f == null) {
                throw new IllegalStateException("native struct " + name + " has no field " + field + " (library and jar differ?)");
            }
            if (f[1] != size) {
                throw new IllegalStateException("native field " + name + "." + field + " is " + f[1] + " bytes, Java expects " + size);
            }
            return f[0];
        }

        public int fieldCount() {
            return fields.size();
        }
    }

    private static volatile Map<String, Struct> structs;

    private NativeLayout() {}

    /** The struct called {@code name} in C (e.g. {@code IbdxnetNextWorkPackage}). */
    public static Struct of(String name) {
        Map<String, Struct> all = structs;
        if (all == null) {
            all = parse(IbdxnetNative.layouts());
            structs = all;
        }
        Struct s = all.get(name);
        if (s == null) {
            throw new IllegalStateException("native library reports no struct " + name);
        }
        return s;
    }

    /** Parses "Name size align field:offset:size ..." lines. */
    static Map<String, Struct> parse(String text) {
        Map<String, Struct> out = new HashMap<>();
        for (String line : text.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] p = line.split(" ");
            Map<String, int[]> fields = new HashMap<>();
            for (int i = 3; i < p.length; i++) {
                String[] f = p[i].split(":");
                fields.put(f[0], new int[] {Integer.parseInt(f[1]), Integer.parseInt(f[2])});
            }
            out.put(p[0], new Struct(p[0], Integer.parseInt(p[1]), Integer.parseInt(p[2]), fields));
        }
        return out;
    }
}
