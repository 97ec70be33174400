package io.ibdxnet.memory;

import java.lang.reflect.Field;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.util.Objects;
import sun.misc.Unsafe;

/**
 * Reads and writes native memory by address: the shared structs and rings of
 * the native engine and the transports' direct buffers. Native byte order
 * (little-endian on x86-64), unaligned plain accesses allowed.
 *
 * <p>This is the {@link Unsafe} implementation, used on JDK 17–21. The jar
 * is multi-release: on JDK 22 and later {@code META-INF/versions/22} holds a
 * class of the same name and API over {@code java.lang.foreign} (no
 * {@code sun.misc.Unsafe} deprecation warning on JDK 24+). Every method is
 * static so the JIT inlines it into the flyweights and the rings.
 */
public final class Memory {
    // A method, not a constant: javac would inline a constant into callers compiled against the base version.
    /** Which implementation is in use: {@code "unsafe"} (JDK 17–21) or {@code "ffm"} (JDK 22+, from the jar). */
    public static String implementation() {
        return "unsafe";
    }

    private static final Unsafe U = find();
    private static final long BYTES = U.arrayBaseOffset(byte[].class);
    private static final long ADDRESS = addressOffset();

    private Memory() {}

    public static byte getByte(long address) {
        return U.getByte(address);
    }

    public static short getShort(long address) {
        return U.getShort(address);
    }

    public static int getInt(long address) {
        return U.getInt(address);
    }

    public static long getLong(long address) {
        return U.getLong(address);
    }

    public static void putByte(long address, byte v) {
        U.putByte(address, v);
    }

    public static void putShort(long address, short v) {
        U.putShort(address, v);
    }

    public static void putInt(long address, int v) {
        U.putInt(address, v);
    }

    public static void putLong(long address, long v) {
        U.putLong(address, v);
    }

    /** A volatile read of a 4-byte aligned int. */
    public static int getIntVolatile(long address) {
        return U.getIntVolatile(null, address);
    }

    /** A volatile write of a 4-byte aligned int. */
    public static void putIntVolatile(long address, int v) {
        U.putIntVolatile(null, address, v);
    }

    /** A volatile read of an 8-byte aligned long. */
    public static long getLongVolatile(long address) {
        return U.getLongVolatile(null, address);
    }

    /** Copies {@code n} bytes from native memory to {@code dst[dstIndex..]}. */
    public static void copy(long src, byte[] dst, int dstIndex, int n) {
        Objects.checkFromIndexSize(dstIndex, n, dst.length);
        U.copyMemory(null, src, dst, BYTES + dstIndex, n);
    }

    /** Copies {@code n} bytes from {@code src[srcIndex..]} to native memory. */
    public static void copy(byte[] src, int srcIndex, long dst, int n) {
        Objects.checkFromIndexSize(srcIndex, n, src.length);
        U.copyMemory(src, BYTES + srcIndex, null, dst, n);
    }

    /** Copies {@code n} bytes from native memory at {@code src} to native memory at {@code dst}. */
    public static void copy(long src, long dst, long n) {
        U.copyMemory(src, dst, n);
    }

    /** Sets {@code n} bytes at {@code address} to {@code v}. */
    public static void fill(long address, long n, byte v) {
        U.setMemory(address, n, v);
    }

    /** The native address of a direct buffer's first byte. */
    public static long address(ByteBuffer direct) {
        if (!direct.isDirect()) {
            throw new IllegalArgumentException("not a direct buffer");
        }
        return U.getLong(direct, ADDRESS);
    }

    private static Unsafe find() {
        try {
            Field f = Unsafe.class.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            return (Unsafe) f.get(null);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static long addressOffset() {
        try {
            return U.objectFieldOffset(Buffer.class.getDeclaredField("address"));
        } catch (NoSuchFieldException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
}
