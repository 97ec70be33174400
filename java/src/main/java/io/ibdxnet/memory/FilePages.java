package io.ibdxnet.memory;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Memory whose pages exist only where they were committed, and that gives
 * them back, on any JDK and without a native library: a file in a tmpfs
 * ({@code /dev/shm} unless {@value #DIRECTORY_PROPERTY} says otherwise),
 * unlinked as soon as it is open and mapped shared
 * ({@code FileChannel.map(READ_WRITE)}). The file starts as a hole of its
 * full size: no page resident, every byte reads zero.
 *
 * <p>Two rules make it safe, and its user keeps them:
 * <ul>
 * <li>Write only where {@link #commit} wrote zeros first (since the last
 * {@link #release}). A tmpfs has a size limit; a page first touched through
 * the mapping when the tmpfs is full is a {@code SIGBUS}, while
 * {@link #commit}, a plain {@code write(2)}, says {@code ENOSPC} as an
 * {@link IOException}.</li>
 * <li>Touch nothing during {@link #release}: it truncates the file to zero
 * and extends it again, and a page beyond the end of the file is a
 * {@code SIGBUS} too.</li>
 * </ul>
 * The file descriptor stays open until {@link #close} (or until this object
 * is collected); the mapping stays valid after that, until its buffer and
 * every view of it are unreachable (the JDK unmaps it then), and its pages
 * are freed with it.
 *
 * <p>The base version's {@link Pages} cannot map memory (JDK 17–21 have no
 * {@code mmap} without a native library), so the transports' rings use this
 * there; on JDK 22+ they use {@link Pages}.
 */
public final class FilePages {
    /**
     * JVM property: the directory, in a tmpfs, for these files;
     * {@code /dev/shm} by default; empty: none (the caller takes direct memory).
     */
    public static final String DIRECTORY_PROPERTY = "ibdxnet.ringDirectory";
    private static final String DEFAULT_DIRECTORY = "/dev/shm";
    /** What {@link #commit} writes from (java.io's writes are not interruptible, unlike a FileChannel's). */
    private static final byte[] ZEROS = new byte[64 << 10];

    private final RandomAccessFile file;
    /** The whole file, mapped. */
    public final ByteBuffer buffer;
    private final long size;

    private FilePages(RandomAccessFile file, ByteBuffer buffer, long size) {
        this.file = file;
        this.buffer = buffer;
        this.size = size;
    }

    /** The directory for these files: {@value #DIRECTORY_PROPERTY}, else {@code /dev/shm}; null if the property is empty. */
    public static Path directory() {
        String d = System.getProperty(DIRECTORY_PROPERTY, DEFAULT_DIRECTORY);
        return d.isEmpty() ? null : Paths.get(d);
    }

    /**
     * Bytes the file system of {@code dir} can still take, or -1 if
     * {@code dir} is not a directory of a tmpfs (then nothing is mapped there:
     * on a disk the pages would be written back to it).
     */
    public static long room(Path dir) {
        try {
            if (!Files.isDirectory(dir)) {
                return -1;
            }
            FileStore store = Files.getFileStore(dir);
            return store.type().equals("tmpfs") ? store.getUsableSpace() : -1;
        } catch (IOException | SecurityException e) {
            return -1;
        }
    }

    /**
     * A new file of {@code bytes} in {@code dir} (a tmpfs), unlinked before
     * this returns, mapped read-write and shared: no page committed yet.
     * An {@link IOException} when it cannot be had (no such directory, no
     * file descriptor left, no address space); nothing is left behind then.
     */
    public static FilePages map(Path dir, long bytes) throws IOException {
        if (bytes <= 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("cannot map " + bytes + " bytes");
        }
        Path path = Files.createTempFile(dir, "ibdxnet-ring-", ""); // owner read/write only
        RandomAccessFile f;
        try {
            f = new RandomAccessFile(path.toFile(), "rw");
        } finally {
            Files.deleteIfExists(path); // unlinked at once: nothing stays in the tmpfs after this process
        }
        try {
            f.setLength(bytes); // a hole: no page yet
            ByteBuffer b = f.getChannel().map(FileChannel.MapMode.READ_WRITE, 0, bytes);
            return new FilePages(f, b, bytes);
        } catch (IOException | RuntimeException e) {
            f.close();
            throw e;
        }
    }

    /**
     * Writes zeros to {@code [offset, offset + bytes)}, which gives those
     * pages memory of their own (the tmpfs's, counted in the process's
     * resident set once touched through the mapping). Overwrites: only for
     * bytes nobody wrote since the last {@link #release}. Not thread-safe
     * (one file offset): the caller serialises it with {@link #release}.
     * An {@link IOException} ({@code ENOSPC}: the tmpfs is full) leaves the
     * range as it was or partly committed, never harmful to touch again
     * through this method.
     */
    public void commit(long offset, long bytes) throws IOException {
        if (offset < 0 || bytes < 0 || offset + bytes > size) {
            throw new IllegalArgumentException("commit of [" + offset + ", " + (offset + bytes) + ") in " + size + " bytes");
        }
        file.seek(offset);
        long left = bytes;
        while (left > 0) {
            int n = (int) Math.min(left, ZEROS.length);
            file.write(ZEROS, 0, n);
            left -= n;
        }
    }

    /**
     * Gives every page back: truncates the file to zero and extends it to its
     * size again (a hole once more, reading zero). Nothing may touch the
     * mapping meanwhile (a {@code SIGBUS}). False if the truncation failed
     * (nothing changed); an {@link IllegalStateException} if the file stayed
     * short after three attempts to extend it: the mapping must then never be
     * touched again.
     */
    public boolean release() {
        try {
            file.setLength(0);
        } catch (IOException e) {
            return false;
        }
        IOException last = null;
        for (int attempt = 0; attempt < 3; attempt++) {
            try {
                file.setLength(size);
                return true;
            } catch (IOException e) {
                last = e;
            }
        }
        throw new IllegalStateException("a ring file stayed truncated: " + last.getMessage(), last);
    }

    /** Closes the file descriptor; the mapping stays (see the class comment). No commit or release after it. */
    public void close() {
        try {
            file.close();
        } catch (IOException e) {
            // closing a file we only wrote with write(2) and ftruncate(2): nothing to lose
        }
    }
}
