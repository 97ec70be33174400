package io.ibdxnet.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;

/**
 * Memory committed page by page as it is first touched: anonymous private
 * mappings ({@code mmap}), whose pages can be given back while the mapping
 * stays ({@code madvise(MADV_DONTNEED)}: they read as zero afterwards).
 *
 * <p>The {@code java.lang.foreign} implementation (JDK 22+, Linux on x86-64
 * or aarch64), calling libc; the base version (JDK 17–21) has none and says
 * so with {@link #available}. Restricted methods: run with
 * {@code --enable-native-access=ALL-UNNAMED}, as for {@link Memory}.
 */
public final class Pages {
    private static final int PROT_READ = 1;
    private static final int PROT_WRITE = 2;
    private static final int MAP_PRIVATE = 2;
    private static final int MAP_ANONYMOUS = 0x20;
    private static final int MADV_DONTNEED = 4;
    private static final long MAP_FAILED = -1;

    private static final MethodHandle MMAP;
    private static final MethodHandle MADVISE;
    private static final MethodHandle MUNMAP;
    private static final MethodHandle MINCORE;
    private static final StructLayout CAPTURE;
    private static final VarHandle ERRNO;
    private static final long PAGE;

    static {
        MethodHandle mmap = null;
        MethodHandle madvise = null;
        MethodHandle munmap = null;
        MethodHandle mincore = null;
        StructLayout capture = null;
        VarHandle errno = null;
        String arch = System.getProperty("os.arch");
        if (System.getProperty("os.name").equals("Linux") && (arch.equals("amd64") || arch.equals("aarch64"))) {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                capture = Linker.Option.captureStateLayout();
                errno = capture.varHandle(MemoryLayout.PathElement.groupElement("errno"));
                ValueLayout.OfLong ptr = ValueLayout.JAVA_LONG; // 64-bit pointers and size_t on both
                mmap = downcall(linker, libc, "mmap", FunctionDescriptor.of(ptr, ptr, ptr, ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG),
                        Linker.Option.captureCallState("errno"));
                madvise = downcall(linker, libc, "madvise",
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ptr, ptr, ValueLayout.JAVA_INT));
                munmap = downcall(linker, libc, "munmap", FunctionDescriptor.of(ValueLayout.JAVA_INT, ptr, ptr));
                mincore = downcall(linker, libc, "mincore",
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ptr, ptr, ValueLayout.ADDRESS));
            } catch (RuntimeException | LinkageError e) {
                mmap = null; // no libc symbols (or native access denied): not available
            }
        }
        MMAP = mmap;
        MADVISE = madvise;
        MUNMAP = munmap;
        CAPTURE = capture;
        ERRNO = errno;
        long page = 4096;
        if (mmap != null) {
            try {
                page = (int) downcall(Linker.nativeLinker(), Linker.nativeLinker().defaultLookup(), "getpagesize",
                        FunctionDescriptor.of(ValueLayout.JAVA_INT)).invokeExact();
            } catch (Throwable t) {
                mincore = null; // page size unknown: no residency
            }
        }
        MINCORE = mincore;
        PAGE = page;
    }

    @SuppressWarnings("restricted")
    private static MethodHandle downcall(Linker linker, SymbolLookup libc, String name, FunctionDescriptor f,
            Linker.Option... options) {
        return linker.downcallHandle(libc.find(name).orElseThrow(), f, options);
    }

    private Pages() {}

    /** True if {@link #map} can be used (JDK 22+ on Linux); false in the base version. */
    public static boolean available() {
        return MMAP != null;
    }

    /**
     * A direct buffer over {@code bytes} of a fresh anonymous private mapping:
     * zero, and resident only where touched. The mapping is unmapped by the
     * JDK (its automatic arena) once the buffer and every view of it
     * ({@code duplicate}, {@code slice}: they hold its memory segment) are
     * unreachable, so an access through a reachable buffer, or by address
     * while such a buffer is reachable, never meets unmapped memory. An
     * {@link IllegalStateException} with the errno when the kernel refuses.
     */
    @SuppressWarnings("restricted")
    public static ByteBuffer map(long bytes) {
        if (!available()) {
            throw new UnsupportedOperationException("no mmap on this JDK");
        }
        if (bytes <= 0) {
            throw new IllegalArgumentException("cannot map " + bytes + " bytes");
        }
        long address;
        int err;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(CAPTURE);
            address = (long) MMAP.invokeExact(state, 0L, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0L);
            err = (int) ERRNO.get(state, 0L);
        } catch (Throwable t) {
            throw new IllegalStateException("mmap of " + bytes + " bytes failed: " + t, t);
        }
        if (address == MAP_FAILED || address == 0) {
            throw new IllegalStateException("mmap of " + bytes + " bytes failed (errno " + err
                    + (err == 12 ? ", ENOMEM: no address space or memory left" : "") + ")");
        }
        try {
            // The cleanup gets a new segment at the same address; it must not (and does not) refer to the buffer.
            MemorySegment s = MemorySegment.ofAddress(address).reinterpret(bytes, Arena.ofAuto(),
                    seg -> unmap(seg.address(), bytes));
            return s.asByteBuffer();
        } catch (RuntimeException | Error e) {
            unmap(address, bytes);
            throw e;
        }
    }

    private static void unmap(long address, long bytes) {
        try {
            int rc = (int) MUNMAP.invokeExact(address, bytes);
            assert rc == 0;
        } catch (Throwable t) {
            // munmap of our own mapping does not fail; nothing to do if it did (the memory stays)
        }
    }

    /**
     * Gives the pages of {@code [address, address + bytes)} (inside a
     * {@link #map} mapping, {@code address} page-aligned) back to the kernel:
     * they read as zero afterwards and are resident again only once touched.
     * False if the kernel refused (nothing changed then).
     */
    public static boolean release(long address, long bytes) {
        try {
            return (int) MADVISE.invokeExact(address, bytes, MADV_DONTNEED) == 0;
        } catch (Throwable t) {
            return false;
        }
    }

    /**
     * Bytes of {@code [address, address + bytes)} (page-aligned start)
     * resident now, in whole pages ({@code mincore}); -1 if that cannot be told.
     */
    public static long resident(long address, long bytes) {
        if (MINCORE == null) {
            return -1;
        }
        long pages = (bytes + PAGE - 1) / PAGE;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment vec = a.allocate(pages);
            if ((int) MINCORE.invokeExact(address, bytes, vec) != 0) {
                return -1;
            }
            long n = 0;
            for (long i = 0; i < pages; i++) {
                n += vec.get(ValueLayout.JAVA_BYTE, i) & 1;
            }
            return n * PAGE;
        } catch (Throwable t) {
            return -1;
        }
    }
}
