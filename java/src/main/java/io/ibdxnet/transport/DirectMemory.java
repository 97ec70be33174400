package io.ibdxnet.transport;

import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;

/**
 * The JVM's direct memory, which the Java transports' receive pools and
 * rings take: its limit, and allocations that fail with a message naming
 * what they were for (the configuration key), the size and the limit instead
 * of a bare {@link OutOfMemoryError}.
 */
public final class DirectMemory {
    private DirectMemory() {}

    /** The JVM's limit: {@code -XX:MaxDirectMemorySize}, else the heap's maximum (as the JDK decides). */
    public static long limit() {
        try {
            com.sun.management.HotSpotDiagnosticMXBean vm =
                    ManagementFactory.getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
            long v = Long.parseLong(vm.getVMOption("MaxDirectMemorySize").getValue());
            if (v > 0) {
                return v;
            }
        } catch (RuntimeException | LinkageError e) {
            // not HotSpot: the JDK's default
        }
        return Runtime.getRuntime().maxMemory();
    }

    /** Direct memory in use now (buffers not yet collected included). */
    public static long used() {
        for (BufferPoolMXBean p : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
            if (p.getName().equals("direct")) {
                return p.getMemoryUsed();
            }
        }
        return -1;
    }

    /** Why {@code bytes} for {@code what} cannot be had: names both, the limit and how to change either. */
    public static String refusal(long bytes, String what) {
        return what + " needs " + bytes + " bytes of direct memory; this JVM allows " + limit() + " (" + used()
                + " in use): lower it or raise -XX:MaxDirectMemorySize";
    }

    /**
     * A direct buffer of {@code bytes} for {@code what} (e.g. {@code "nioRingSize = 1073741824"});
     * an {@link IllegalStateException} saying {@link #refusal} when the JVM has no room.
     */
    public static ByteBuffer allocate(int bytes, String what) {
        try {
            return ByteBuffer.allocateDirect(bytes);
        } catch (OutOfMemoryError e) {
            throw new IllegalStateException(refusal(bytes, what) + " (" + e.getMessage() + ")", e);
        }
    }
}
