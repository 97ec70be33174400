package io.ibdxnet.ib;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Properties;

/**
 * Loads libibdxnet.so, trying in this order: the file named by the system
 * property {@code ibdxnet.library} (an explicit path: nothing else is tried),
 * {@code java.library.path}, the directory of the jar holding this class,
 * then the copy the jar carries ({@code native/linux-x86_64/libibdxnet.so},
 * extracted to an owner-only temporary file that is deleted once loaded).
 *
 * <p>The library's {@code JNI_OnLoad} reports its version
 * ({@code "<version> abi <n>"}) before it registers anything; a library
 * built for another jar is refused with {@link LibraryMismatchError}.
 */
public final class NativeLibrary {
    public static final String PATH_PROPERTY = "ibdxnet.library";
    private static final String NAME = "ibdxnet";
    /** Written at build time from gradle.properties (version, nativeAbi). */
    private static final String VERSION_RESOURCE = "native-version.properties";
    private static boolean loaded;
    private static String source;
    /** The library being loaded, for the mismatch message. */
    private static String attempt = "libibdxnet.so";

    private NativeLibrary() {}

    /** The library was built for another jar (version or native ABI differ). */
    public static final class LibraryMismatchError extends UnsatisfiedLinkError {
        private static final long serialVersionUID = 1L;

        LibraryMismatchError(String message) {
            super(message);
        }
    }

    /**
     * Loads the library once. Through {@link IbdxnetNative}'s initialisation:
     * {@code JNI_OnLoad} finds (and so initialises) that class to register its
     * natives, and its initialiser starts the native log with a native call;
     * loading from anywhere else first ran that initialiser before the natives
     * were registered, and the registration failed.
     */
    public static void load() {
        IbdxnetNative.ensureLoaded();
    }

    /** The loading itself: only from {@link IbdxnetNative}'s static initialiser. */
    static synchronized void loadLibrary() {
        if (loaded) {
            return;
        }
        String explicit = System.getProperty(PATH_PROPERTY);
        if (explicit != null && !explicit.isEmpty()) {
            File f = new File(explicit).getAbsoluteFile();
            try {
                load(f, "-D" + PATH_PROPERTY + "=" + f);
            } catch (LibraryMismatchError e) {
                throw e;
            } catch (UnsatisfiedLinkError e) {
                UnsatisfiedLinkError named = new UnsatisfiedLinkError("lib" + NAME + ".so from -D" + PATH_PROPERTY + "=" + f
                        + " could not be loaded (nothing else is tried when it is set): " + e.getMessage());
                named.initCause(e);
                throw named;
            }
            return;
        }
        List<String> tried = new ArrayList<>();
        tried.add("-D" + PATH_PROPERTY + " (not set)");
        try {
            attempt = onLibraryPath();
            System.loadLibrary(NAME);
            done("java.library.path");
            return;
        } catch (LibraryMismatchError e) {
            throw e;
        } catch (UnsatisfiedLinkError e) {
            tried.add("java.library.path=" + System.getProperty("java.library.path") + " (" + e.getMessage() + ")");
        }
        File beside = besideJar();
        if (beside != null && beside.isFile()) {
            load(beside, beside.toString());
            return;
        }
        tried.add("next to the jar (" + (beside == null ? "no jar location" : beside + ": no such file") + ")");
        String resource = resourcePath();
        try (InputStream in = NativeLibrary.class.getResourceAsStream("/" + resource)) {
            if (in == null) {
                tried.add("classpath resource " + resource + " (not on the classpath; the jar carries linux-x86_64 only)");
            } else {
                Path file = extract(in, Paths.get(System.getProperty("java.io.tmpdir")));
                try {
                    load(file.toFile(), "classpath resource " + resource + " (extracted to " + file + ")");
                    return;
                } catch (LibraryMismatchError e) {
                    throw e;
                } catch (UnsatisfiedLinkError e) {
                    tried.add("classpath resource " + resource + " extracted to " + file + " (" + e.getMessage() + ")");
                } finally {
                    // Once mapped, the file is no longer needed (Linux keeps the mapping).
                    Files.deleteIfExists(file);
                }
            }
        } catch (IOException e) {
            tried.add("classpath resource " + resource + " (extracting to " + System.getProperty("java.io.tmpdir")
                    + " failed: " + e + ")");
        }
        throw new UnsatisfiedLinkError("lib" + NAME + ".so could not be loaded; tried: " + String.join("; ", tried)
                + ". Set -D" + PATH_PROPERTY + "=/path/to/lib" + NAME + ".so or put the io.ibdxnet:ibdxnet jar on the classpath.");
    }

    /** Where the library was loaded from (null before {@link #load}). */
    public static synchronized String source() {
        return source;
    }

    /** The version this jar expects of the library: {@code "<version> abi <n>"}. */
    public static String expectedVersion() {
        Properties p = new Properties();
        try (InputStream in = NativeLibrary.class.getResourceAsStream(VERSION_RESOURCE)) {
            if (in == null) {
                return "unknown (no " + VERSION_RESOURCE + " next to " + NativeLibrary.class.getName() + ")";
            }
            p.load(in);
        } catch (IOException e) {
            return "unknown (" + VERSION_RESOURCE + ": " + e + ")";
        }
        return p.getProperty("version") + " abi " + p.getProperty("abi");
    }

    /**
     * Called by the library's {@code JNI_OnLoad} with its own version before
     * it registers its natives; throws if this jar expects another.
     */
    static void checkLibraryVersion(String library) {
        String expected = expectedVersion();
        if (!expected.equals(library)) {
            throw new LibraryMismatchError(mismatchMessage(attempt, library, expected));
        }
    }

    static String mismatchMessage(String where, String library, String expected) {
        return where + " is libibdxnet " + library + ", but this jar (io.ibdxnet:ibdxnet) expects " + expected
                + ": use the library built with the jar (the jar carries one; remove the other from -D" + PATH_PROPERTY
                + " / java.library.path)";
    }

    /** "native/linux-x86_64/libibdxnet.so" on this platform. */
    static String resourcePath() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux") ? "linux"
                : System.getProperty("os.name", "unknown").toLowerCase(Locale.ROOT).replace(' ', '_');
        String arch = System.getProperty("os.arch", "unknown");
        if (arch.equals("amd64")) {
            arch = "x86_64";
        }
        return "native/" + os + "-" + arch + "/" + System.mapLibraryName(NAME);
    }

    /** Copies the library into a new file in {@code dir} that only its owner may read or write. */
    static Path extract(InputStream in, Path dir) throws IOException {
        Path file = Files.createTempFile(dir, "lib" + NAME + "-", ".so",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        // Into the file as created (Files.copy with REPLACE_EXISTING would make a new one with the umask's permissions).
        try (OutputStream out = Files.newOutputStream(file)) {
            in.transferTo(out);
        } catch (IOException e) {
            Files.deleteIfExists(file);
            throw e;
        }
        file.toFile().deleteOnExit();
        return file;
    }

    private static void load(File f, String where) {
        attempt = where;
        System.load(f.getAbsolutePath());
        done(where);
    }

    private static void done(String where) {
        source = where;
        loaded = true;
    }

    /** The file System.loadLibrary will find, for messages. */
    private static String onLibraryPath() {
        String name = System.mapLibraryName(NAME);
        for (String dir : System.getProperty("java.library.path", "").split(File.pathSeparator)) {
            File f = new File(dir, name);
            if (!dir.isEmpty() && f.isFile()) {
                return f.getAbsolutePath() + " (java.library.path)";
            }
        }
        return name + " on java.library.path";
    }

    private static File besideJar() {
        try {
            File code = new File(NativeLibrary.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            File dir = code.isFile() ? code.getParentFile() : code;
            return new File(dir, System.mapLibraryName(NAME));
        } catch (URISyntaxException | SecurityException | NullPointerException | IllegalArgumentException e) {
            return null;
        }
    }
}
