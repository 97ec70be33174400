package io.ibdxnet.sanitizer;

/**
 * Negative control for the AddressSanitizer run ({@code tools/asan/run.sh}):
 * calls a native method with a deliberate heap overflow. Under ASan the JVM
 * must die with a report; a normal exit means the sanitizer is not working.
 */
public final class AsanProbe {
    private AsanProbe() {}

    private static native int readPastAllocation();

    public static void main(String[] args) {
        System.loadLibrary("ibdxnet_asan_probe");
        System.out.println("read past the allocation: " + readPastAllocation() + " (no sanitizer report)");
    }
}
