package io.ibdxnet.ib;

/** Child JVM of {@link NativeLibraryJarTest}: loads the library, asks it for its defaults, says where it came from. */
public final class LoadLibraryMain {
    private LoadLibraryMain() {}

    public static void main(String[] args) {
        int keys = NativeEngine.defaults().size();
        System.out.println("loaded from: " + NativeLibrary.source());
        System.out.println("default keys: " + keys);
    }
}
