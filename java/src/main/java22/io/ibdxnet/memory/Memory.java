package io.ibdxnet.memory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;

/**
 * Reads and writes native memory by address: the shared structs and rings of
 * the native engine and the transports' direct buffers. Native byte order
 * (little-endian on x86-64), unaligned plain accesses allowed.
 *
 * <p>The {@code java.lang.foreign} implementation, in the multi-release jar
 * for JDK 22 and later (the {@code sun.misc.Unsafe} one serves JDK 17–21).
 * Addresses come from the native engine as numbers, so everything goes
 * through one segment spanning the whole address space; creating it is a
 * restricted method: run with {@code --enable-native-access=ALL-UNNAMED}
 * (the JNI library load needs it on JDK 24+ as well) or the JDK prints a
 * warning.
 */
public final class Memory {
    // A method, not a constant: javac would inline a constant into callers compiled against the base version.
    /** Which implementation is in use: {@code "unsafe"} (JDK 17–21) or {@code "ffm"} (JDK 22+, from the jar). */
    public static String implementation() {
        return "ffm";
    }

    // [0, Long.MAX_VALUE): user-space addresses on x86-64 are below 2^47.
    // Restricted: addresses handed over by the engine are trusted like Unsafe's were.
    @SuppressWarnings("restricted")
    private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    // Plain accesses: unaligned layouts (as Unsafe allowed), native order.
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    // Volatile accesses need the aligned layout (a misaligned address throws).
    private static final VarHandle INT_ALIGNED = ValueLayout.JAVA_INT.varHandle();
    private static final VarHandle LONG_ALIGNED = ValueLayout.JAVA_LONG.varHandle();

    private Memory() {}

    public static byte getByte(long address) {
        return ALL.get(ValueLayout.JAVA_BYTE, address);
    }

    public static short getShort(long address) {
        return ALL.get(SHORT, address);
    }

    public static int getInt(long address) {
        return ALL.get(INT, address);
    }

    public static long getLong(long address) {
        return ALL.get(LONG, address);
    }

    public static void putByte(long address, byte v) {
        ALL.set(ValueLayout.JAVA_BYTE, address, v);
    }

    public static void putShort(long address, short v) {
        ALL.set(SHORT, address, v);
    }

    public static void putInt(long address, int v) {
        ALL.set(INT, address, v);
    }

    public static void putLong(long address, long v) {
        ALL.set(LONG, address, v);
    }

    /** A volatile read of a 4-byte aligned int. */
    public static int getIntVolatile(long address) {
        return (int) INT_ALIGNED.getVolatile(ALL, address);
    }

    /** A volatile write of a 4-byte aligned int. */
    public static void putIntVolatile(long address, int v) {
        INT_ALIGNED.setVolatile(ALL, address, v);
    }

    /** A volatile read of an 8-byte aligned long. */
    public static long getLongVolatile(long address) {
        return (long) LONG_ALIGNED.getVolatile(ALL, address);
    }

    /** Copies {@code n} bytes from native memory to {@code dst[dstIndex..]}. */
    public static void copy(long src, byte[] dst, int dstIndex, int n) {
        MemorySegment.copy(ALL, ValueLayout.JAVA_BYTE, src, dst, dstIndex, n);
    }

    /** Copies {@code n} bytes from {@code src[srcIndex..]} to native memory. */
    public static void copy(byte[] src, int srcIndex, long dst, int n) {
        MemorySegment.copy(src, srcIndex, ALL, ValueLayout.JAVA_BYTE, dst, n);
    }

    /** Copies {@code n} bytes from native memory at {@code src} to native memory at {@code dst}. */
    public static void copy(long src, long dst, long n) {
        MemorySegment.copy(ALL, src, ALL, dst, n);
    }

    /** Sets {@code n} bytes at {@code address} to {@code v}. */
    public static void fill(long address, long n, byte v) {
        ALL.asSlice(address, n).fill(v);
    }

    /** The native address of a direct buffer's first byte. */
    public static long address(ByteBuffer direct) {
        if (!direct.isDirect()) {
            throw new IllegalArgumentException("not a direct buffer");
        }
        return MemorySegment.ofBuffer(direct).address() - direct.position();
    }
}
