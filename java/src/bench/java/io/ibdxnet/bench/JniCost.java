package io.ibdxnet.bench;

import io.ibdxnet.ib.NativeLibrary;

/**
 * Natives for the JNI cost table: only in a libibdxnet built with the cargo
 * feature {@code bench-natives} (the JMH task builds one; the product library
 * has none, and calling these there is an {@link UnsatisfiedLinkError}).
 */
public final class JniCost {
    static {
        NativeLibrary.load();
    }

    private JniCost() {}

    /** Java → native, static, no arguments. */
    public static native void noop();

    /** Java → native, static, three primitive arguments. */
    public static native long withArgs(long a, int b, long c);

    /** Copies {@code array} to native memory at {@code address} through JNI. */
    public static native void copyIn(byte[] array, long address);

    /**
     * Makes {@code count} up-calls to {@code target} from a native thread;
     * mode 0: {@code callback(long)} attached once, raw JNI; 1: plus an exception check
     * per call (the engine's way until native ABI 4); 2: attach/detach per call; 3: attached
     * once, through the jni crate's checked call; 4 and 5: the engine's own up-call code
     * ({@code JniHandler}'s send and receive path, {@code target} an {@code EngineCallbacks});
     * 6 and 7: the raw JNI calls of the same two methods, no check (their floor).
     * Returns the elapsed nanoseconds.
     */
    public static native long upcalls(Object target, int count, int mode);
}
