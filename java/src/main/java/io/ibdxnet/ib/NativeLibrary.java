package io.ibdxnet.ib;

import java.io.File;
import java.net.URISyntaxException;

/**
 * Loads libibdxnet.so, in this order: the file named by the system property
 * {@code ibdxnet.library} (an explicit path), {@code java.library.path}, then
 * the directory of the jar holding this class.
 */
public final class NativeLibrary {
    public static final String PATH_PROPERTY = "ibdxnet.library";
    private static final String NAME = "ibdxnet";
    private static boolean loaded;

    private NativeLibrary() {}

    public static synchronized void load() {
        if (loaded) {
            return;
        }
        String explicit = System.getProperty(PATH_PROPERTY);
        if (explicit != null && !explicit.isEmpty()) {
            System.load(new File(explicit).getAbsolutePath());
            loaded = true;
            return;
        }
        try {
            System.loadLibrary(NAME);
            loaded = true;
            return;
        } catch (UnsatisfiedLinkError notOnPath) {
            File beside = besideJar();
            if (beside == null || !beside.isFile()) {
                UnsatisfiedLinkError e = new UnsatisfiedLinkError("lib" + NAME + ".so not found: set -D" + PATH_PROPERTY
                        + "=/path/to/lib" + NAME + ".so, put it on java.library.path or next to the jar ("
                        + notOnPath.getMessage() + ")");
                e.initCause(notOnPath);
                throw e;
            }
            System.load(beside.getAbsolutePath());
            loaded = true;
        }
    }

    private static File besideJar() {
        try {
            File code = new File(NativeLibrary.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            File dir = code.isFile() ? code.getParentFile() : code;
            return new File(dir, System.mapLibraryName(NAME));
        } catch (URISyntaxException | SecurityException | NullPointerException e) {
            return null;
        }
    }
}
