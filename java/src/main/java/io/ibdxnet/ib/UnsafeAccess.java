package io.ibdxnet.ib;

import java.lang.reflect.Field;
import sun.misc.Unsafe;

/** The one {@link Unsafe} instance, for reading and writing native structs and rings. */
public final class UnsafeAccess {
    public static final Unsafe UNSAFE = find();

    private UnsafeAccess() {}

    private static Unsafe find() {
        try {
            Field f = Unsafe.class.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            return (Unsafe) f.get(null);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
}
