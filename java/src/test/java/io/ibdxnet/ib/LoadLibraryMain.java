package io.ibdxnet.ib;

/**
 * Child JVM of {@link NativeLibraryJarTest}: loads the library, asks it for
 * its defaults, says where it came from. With the argument {@code load-first}
 * it calls {@link NativeLibrary#load} before anything else of the library
 * (as the JMH benchmark's natives do).
 */
public final class LoadLibraryMain {
    private LoadLibraryMain() {}

    public static void main(String[] args) {
        if (args.length > 0 && args[0].equals("load-first")) {
            NativeLibrary.load();
        }
        int keys = NativeEngine.defaults().size();
        System.out.println("loaded from: " + NativeLibrary.source());
        System.out.println("default keys: " + keys);
    }
}
