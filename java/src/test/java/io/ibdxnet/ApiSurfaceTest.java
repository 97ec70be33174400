package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.lang.reflect.Constructor;
import java.lang.reflect.Executable;
import java.lang.reflect.Field;
import java.lang.reflect.GenericArrayType;
import java.lang.reflect.Member;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.lang.reflect.TypeVariable;
import java.lang.reflect.WildcardType;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The API package shows nothing internal: no public or protected member of a
 * public class of {@code io.ibdxnet} names a type of another of our packages
 * (in its type, parameters, exceptions, type arguments or supertypes), so a
 * user compiles against the API package alone and the module exports only it.
 */
public class ApiSurfaceTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    /** The public classes of the API package, from the main class directories. */
    static List<Class<?>> apiClasses() throws ClassNotFoundException {
        String dirs = System.getProperty("test.mainClassesDirs");
        assertTrue("test.mainClassesDirs is not set (the Gradle test task sets it)", dirs != null);
        Set<String> names = new TreeSet<>();
        for (String dir : dirs.split(File.pathSeparator)) {
            File[] files = new File(dir, "io/ibdxnet").listFiles();
            if (files == null) {
                continue;
            }
            for (File f : files) {
                if (f.getName().endsWith(".class")) {
                    names.add("io.ibdxnet." + f.getName().replace(".class", "").replace('/', '.'));
                }
            }
        }
        List<Class<?>> out = new ArrayList<>();
        for (String n : names) {
            Class<?> c = Class.forName(n, false, ApiSurfaceTest.class.getClassLoader());
            if (visible(c)) {
                out.add(c);
            }
        }
        return out;
    }

    /** Public, and (if nested) inside a visible class. */
    private static boolean visible(Class<?> c) {
        for (Class<?> k = c; k != null; k = k.getDeclaringClass()) {
            if (!Modifier.isPublic(k.getModifiers()) && !(k != c && Modifier.isProtected(k.getModifiers()))) {
                return false;
            }
        }
        return true;
    }

    @Test
    public void noPublicSignatureNamesAnInternalType() throws ClassNotFoundException {
        List<Class<?>> api = apiClasses();
        assertTrue("found the API classes: " + api, api.contains(DXNet.class) && api.contains(Message.class));
        List<String> leaks = new ArrayList<>();
        for (Class<?> c : api) {
            leaks.addAll(leaksOf(c));
        }
        assertTrue("internal types in the API's signatures:\n" + String.join("\n", leaks), leaks.isEmpty());
    }

    @Test
    public void aLeakIsFound() {
        // The check itself: a class whose public method returns an internal type is reported.
        List<String> leaks = leaksOf(Leaky.class);
        assertEquals(leaks.toString(), 1, leaks.size());
        assertTrue(leaks.get(0), leaks.get(0).contains("io.ibdxnet.transport.NodeId"));
    }

    /** A public class that leaks (for {@link #aLeakIsFound}). */
    public static final class Leaky {
        /** Leaks {@code NodeId}. */
        public List<io.ibdxnet.transport.NodeId> ids() {
            return null;
        }

        /** Private: not a leak. */
        @SuppressWarnings("unused")
        private io.ibdxnet.transport.NodeId hidden() {
            return null;
        }
    }

    static List<String> leaksOf(Class<?> c) {
        List<String> leaks = new ArrayList<>();
        check(c.getName() + " extends", c.getGenericSuperclass(), leaks);
        for (Type t : c.getGenericInterfaces()) {
            check(c.getName() + " implements", t, leaks);
        }
        for (Field f : c.getDeclaredFields()) {
            if (exposed(f)) {
                check(c.getName() + "." + f.getName(), f.getGenericType(), leaks);
            }
        }
        List<Executable> execs = new ArrayList<>(Arrays.asList(c.getDeclaredMethods()));
        execs.addAll(Arrays.<Constructor<?>>asList(c.getDeclaredConstructors()));
        for (Executable e : execs) {
            if (!exposed(e) || e.isSynthetic()) {
                continue;
            }
            String where = c.getName() + "." + e.getName();
            if (e instanceof Method) {
                check(where + " returns", ((Method) e).getGenericReturnType(), leaks);
            }
            for (Type t : e.getGenericParameterTypes()) {
                check(where + " takes", t, leaks);
            }
            for (Type t : e.getGenericExceptionTypes()) {
                check(where + " throws", t, leaks);
            }
        }
        return leaks;
    }

    private static boolean exposed(Member m) {
        int mod = m.getModifiers();
        boolean finalClass = Modifier.isFinal(m.getDeclaringClass().getModifiers());
        return Modifier.isPublic(mod) || Modifier.isProtected(mod) && !finalClass;
    }

    private static void check(String where, Type t, List<String> leaks) {
        if (t == null) {
            return;
        }
        if (t instanceof Class) {
            Class<?> k = (Class<?>) t;
            while (k.isArray()) {
                k = k.getComponentType();
            }
            String p = k.getPackageName();
            if (p.startsWith("io.ibdxnet.") && !p.equals("io.ibdxnet")) {
                leaks.add(where + ": " + k.getName());
            }
        } else if (t instanceof ParameterizedType) {
            check(where, ((ParameterizedType) t).getRawType(), leaks);
            for (Type a : ((ParameterizedType) t).getActualTypeArguments()) {
                check(where, a, leaks);
            }
        } else if (t instanceof GenericArrayType) {
            check(where, ((GenericArrayType) t).getGenericComponentType(), leaks);
        } else if (t instanceof WildcardType) {
            for (Type b : ((WildcardType) t).getUpperBounds()) {
                check(where, b, leaks);
            }
            for (Type b : ((WildcardType) t).getLowerBounds()) {
                check(where, b, leaks);
            }
        } else if (t instanceof TypeVariable) {
            // Bounds of a type variable are checked where it is declared (the class or method's own bounds).
            for (Type b : ((TypeVariable<?>) t).getBounds()) {
                if (b instanceof Class) {
                    check(where, b, leaks);
                }
            }
        }
    }
}
