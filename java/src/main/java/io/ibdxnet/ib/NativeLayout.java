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

    /**
     * The descriptor of the engine's counters table ({@link NativeCounters}):
     * slot count, bytes from slot to slot, the value's offset in a slot, and
     * each slot's name, kind ({@code counter} or {@code gauge}) and meaning,
     * in slot order. Names are the library's: Java spells none it does not need.
     */
    public static final class Counters {
        public final int stride;
        public final int valueOffset;
        final String[] names;
        final String[] kinds;
        final String[] docs;

        Counters(int stride, int valueOffset, String[] names, String[] kinds, String[] docs) {
            this.stride = stride;
            this.valueOffset = valueOffset;
            this.names = names;
            this.kinds = kinds;
            this.docs = docs;
        }

        public int size() {
            return names.length;
        }

        public String name(int i) {
            return names[i];
        }

        public String kind(int i) {
            return kinds[i];
        }

        public String doc(int i) {
            return docs[i];
        }

        /**
         * The slot of counter {@code name}; an {@link IllegalStateException}
         * naming it if the library has none (look it up once, at start).
         */
        public int require(String name) {
            for (int i = 0; i < names.length; i++) {
                if (names[i].equals(name)) {
                    return i;
                }
            }
            throw new IllegalStateException("native library reports no counter " + name + " (library and jar differ?)");
        }
    }

    /** The parsed table: structs by name, constants by name, the counters' descriptor. */
    static final class Table {
        final Map<String, Struct> structs = new HashMap<>();
        final Map<String, Long> constants = new HashMap<>();
        Counters counters;

        Counters counters() {
            if (counters == null) {
                throw new IllegalStateException("native library reports no counters table (library and jar differ?)");
            }
            return counters;
        }

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

    /** The descriptor of the engine's counters table. */
    public static Counters counters() {
        return table().counters();
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
     * "const NAME value" per constant, then the counters' descriptor:
     * "counters count stride valueOffset" and "counter index name kind doc..."
     * per slot, in slot order.
     */
    static Table parse(String text) {
        Table out = new Table();
        java.util.List<String[]> slots = new java.util.ArrayList<>();
        int[] counters = null;
        for (String line : text.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] p = line.split(" ");
            if (p[0].equals("const")) {
                out.constants.put(p[1], Long.parseLong(p[2]));
                continue;
            }
            if (p[0].equals("counters")) {
                counters = new int[] {Integer.parseInt(p[1]), Integer.parseInt(p[2]), Integer.parseInt(p[3])};
                continue;
            }
            if (p[0].equals("counter")) {
                String[] q = line.split(" ", 5);
                if (Integer.parseInt(q[1]) != slots.size()) {
                    throw new IllegalStateException("native counters descriptor out of order at: " + line);
                }
                slots.add(new String[] {q[2], q[3], q.length > 4 ? q[4] : ""});
                continue;
            }
            Map<String, int[]> fields = new HashMap<>();
            for (int i = 3; i < p.length; i++) {
                String[] f = p[i].split(":");
                fields.put(f[0], new int[] {Integer.parseInt(f[1]), Integer.parseInt(f[2])});
            }
            out.structs.put(p[0], new Struct(p[0], Integer.parseInt(p[1]), Integer.parseInt(p[2]), fields));
        }
        if (counters != null) {
            if (counters[0] != slots.size()) {
                throw new IllegalStateException("native counters descriptor names " + slots.size() + " of " + counters[0] + " slots");
            }
            String[] names = new String[slots.size()];
            String[] kinds = new String[slots.size()];
            String[] docs = new String[slots.size()];
            for (int i = 0; i < names.length; i++) {
                names[i] = slots.get(i)[0];
                kinds[i] = slots.get(i)[1];
                docs[i] = slots.get(i)[2];
            }
            out.counters = new Counters(counters[1], counters[2], names, kinds, docs);
        }
        return out;
    }
}
