package io.ibdxnet.ib;

import java.util.HashMap;
import java.util.Map;

/**
 * The contract with the native engine as the native library reports it (its
 * {@code abi} module): the layout of the shared structs and the constants
 * their fields and the natives' results take. Java hard-codes neither an
 * offset nor such a constant: the classes of this package look theirs up here
 * once, in their static initialisers (checking field sizes), and
 * {@link #requireAll} makes them all do so before an engine starts.
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

    /** The parsed table: structs by name, constants by name. */
    static final class Table {
        final Map<String, Struct> structs = new HashMap<>();
        final Map<String, Long> constants = new HashMap<>();

        Struct struct(String name) {
            Struct s = structs.get(name);
            if (s == null) {
                throw new IllegalStateException("native library reports no struct " + name + " (library and jar differ?)");
            }
            return s;
        }

        long constant(String name) {
            Long v = constants.get(name);
            if (v == null) {
                throw new IllegalStateException("native library reports no constant " + name + " (library and jar differ?)");
            }
            return v;
        }
    }

    private static volatile Table table;

    private NativeLayout() {}

    private static Table table() {
        Table t = table;
        if (t == null) {
            t = parse(IbdxnetNative.layouts());
            table = t;
        }
        return t;
    }

    /** The struct called {@code name} in C (e.g. {@code IbdxnetNextWorkPackage}). */
    public static Struct of(String name) {
        return table().struct(name);
    }

    /** The constant called {@code name} in the native {@code abi} module (e.g. {@code NO_BUFFER}). */
    public static long constant(String name) {
        return table().constant(name);
    }

    /**
     * Initialises {@code readers}, the classes of this package that read an
     * offset or a constant (the engine names them), so a library that lacks one
     * fails here, with the name, rather than in a callback on a native thread
     * (where the exception is only logged).
     */
    static void requireAll(Class<?>... readers) {
        for (Class<?> c : readers) {
            try {
                Class.forName(c.getName(), true, c.getClassLoader());
            } catch (ExceptionInInitializerError e) {
                if (e.getCause() instanceof RuntimeException) {
                    throw (RuntimeException) e.getCause(); // names what the library lacks
                }
                throw e;
            } catch (ClassNotFoundException e) {
                throw new AssertionError(e); // c is loaded already
            }
        }
    }

    /**
     * Parses the table: "Name size align field:offset:size ..." per struct,
     * "const NAME value" per constant.
     */
    static Table parse(String text) {
        Table out = new Table();
        for (String line : text.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] p = line.split(" ");
            if (p[0].equals("const")) {
                out.constants.put(p[1], Long.parseLong(p[2]));
                continue;
            }
            Map<String, int[]> fields = new HashMap<>();
            for (int i = 3; i < p.length; i++) {
                String[] f = p[i].split(":");
                fields.put(f[0], new int[] {Integer.parseInt(f[1]), Integer.parseInt(f[2])});
            }
            out.structs.put(p[0], new Struct(p[0], Integer.parseInt(p[1]), Integer.parseInt(p[2]), fields));
        }
        return out;
    }
}
