package io.ibdxnet.transport;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.Set;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The pre-shared key of a node (optional): the content of the file
 * {@code authKeyFile} names, else the environment variable
 * {@value #ENV}, trailing whitespace trimmed, at least {@value #MIN_BYTES}
 * bytes. The native engine reads the same file and variable the same way.
 * The key never appears in a log line, message or {@link #toString}.
 */
public final class AuthKey {
    /** The environment variable holding the key itself when no file is configured. */
    public static final String ENV = "IBDXNET_AUTH_KEY";
    public static final int MIN_BYTES = 16;
    /** The largest key file read: a regular file of at most this many bytes (a key needs far less). */
    public static final int MAX_FILE_BYTES = 64 << 10;
    private static final String ALGORITHM = "HmacSHA256";
    private static final Set<PosixFilePermission> GROUP_OR_OTHERS = EnumSet.of(
            PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);

    private final SecretKeySpec key;
    private final String source;

    private AuthKey(byte[] bytes, String source) {
        this.key = new SecretKeySpec(bytes, ALGORITHM);
        Arrays.fill(bytes, (byte) 0);
        this.source = source;
    }

    /**
     * The configured key: from {@code file} if it is not null, else from the
     * environment; null if neither is set. Errors name the setting and the reason.
     */
    public static AuthKey load(String file) {
        return load(file, System.getenv(ENV));
    }

    /** {@link #load(String)} with the environment variable's value given (tests). */
    static AuthKey load(String file, String env) {
        if (file != null) {
            return fromFile(Paths.get(file));
        }
        if (env != null) {
            return fromBytes(env.getBytes(StandardCharsets.UTF_8), "the environment variable " + ENV);
        }
        return null;
    }

    private static AuthKey fromFile(Path file) {
        try {
            PosixFileAttributeView view = Files.getFileAttributeView(file, PosixFileAttributeView.class);
            if (view == null) {
                throw new IllegalArgumentException("authKeyFile '" + file + "': the file system has no POSIX permissions to check");
            }
            PosixFileAttributes attributes = view.readAttributes();
            if (!attributes.isRegularFile()) {
                // A FIFO would block the start until someone writes to it, a device might never end.
                throw new IllegalArgumentException("authKeyFile '" + file + "' is not a regular file ("
                        + (attributes.isDirectory() ? "a directory" : "a FIFO, socket or device")
                        + "): the key must be in a regular file of at most " + MAX_FILE_BYTES + " bytes");
            }
            if (attributes.size() > MAX_FILE_BYTES) {
                throw new IllegalArgumentException("authKeyFile '" + file + "' has " + attributes.size()
                        + " bytes: a key file must have at most " + MAX_FILE_BYTES);
            }
            Set<PosixFilePermission> perms = attributes.permissions();
            if (!java.util.Collections.disjoint(perms, GROUP_OR_OTHERS)) {
                throw new IllegalArgumentException("authKeyFile '" + file + "' has permissions "
                        + PosixFilePermissions.toString(perms) + ": group and others must have none (chmod 600)");
            }
            return fromBytes(readAtMost(file, MAX_FILE_BYTES), "authKeyFile '" + file + "'");
        } catch (NoSuchFileException e) {
            throw new IllegalArgumentException("authKeyFile '" + file + "' does not exist", e);
        } catch (IOException e) {
            throw new IllegalArgumentException("authKeyFile '" + file + "' cannot be read: " + e.getMessage(), e);
        }
    }

    /** The file's bytes, refused when it holds more than {@code max} (it may have grown since it was checked). */
    private static byte[] readAtMost(Path file, int max) throws IOException {
        byte[] buf = new byte[max + 1];
        int n = 0;
        try (InputStream in = Files.newInputStream(file)) {
            for (int r; n < buf.length && (r = in.read(buf, n, buf.length - n)) > 0;) {
                n += r;
            }
        }
        if (n > max) {
            Arrays.fill(buf, (byte) 0);
            throw new IllegalArgumentException("authKeyFile '" + file + "' has more than " + max
                    + " bytes: a key file must have at most " + max);
        }
        byte[] out = Arrays.copyOf(buf, n);
        Arrays.fill(buf, (byte) 0);
        return out;
    }

    private static AuthKey fromBytes(byte[] raw, String source) {
        int n = raw.length;
        while (n > 0 && isTrailingSpace(raw[n - 1])) {
            n--;
        }
        byte[] bytes = Arrays.copyOf(raw, n);
        Arrays.fill(raw, (byte) 0);
        if (n < MIN_BYTES) {
            Arrays.fill(bytes, (byte) 0);
            throw new IllegalArgumentException(source + ": the key has " + n + " bytes, at least " + MIN_BYTES + " are needed");
        }
        return new AuthKey(bytes, source);
    }

    private static boolean isTrailingSpace(byte b) {
        return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == 0x0B || b == '\f';
    }

    /** A fresh HMAC-SHA256 keyed with this key (a {@link Mac} is not thread-safe: one per user). */
    public Mac newMac() {
        try {
            Mac mac = Mac.getInstance(ALGORITHM);
            mac.init(key);
            return mac;
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(ALGORITHM + " is not available in this JVM", e);
        }
    }

    /** Where the key came from (a file name or the variable's name; never the key). */
    public String source() {
        return source;
    }

    @Override
    public String toString() {
        return "AuthKey(from " + source + ")";
    }
}
