package io.ibdxnet.transport;

import io.ibdxnet.memory.FilePages;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.Pages;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The memory of one Java transport's outgoing ring (nio, loopback): zero
 * bytes, resident only where the ring was written since its pages were
 * last given back ({@link OutgoingRingBuffer#releaseIfIdle}: once it was
 * empty for a second). The first of these that the JVM offers:
 * <ul>
 * <li><b>mapped</b> (JDK 22+ with the jar, {@link Pages}): an anonymous
 * private mapping, committed page by page as it is first touched, given back
 * with {@code madvise} (the pages read zero again, which the ring's zero-word
 * protocol needs);</li>
 * <li><b>a file</b> (JDK 17–21, {@link FilePages}): an unlinked file in a
 * tmpfs ({@code /dev/shm}), mapped shared; the ring commits pages ahead of
 * its producers ({@link #commit}: zeros written, so a full tmpfs is an error
 * naming {@code nioRingSize}, never a {@code SIGBUS} at a producer's first
 * touch), and gives them back by truncating the file while producers are
 * kept out. Used only while the tmpfs has room for every such ring of this
 * JVM in full ({@link #PROMISED}); one file descriptor per ring until it is
 * closed;</li>
 * <li><b>direct</b>: a direct buffer, zeroed and so resident in full from
 * the start, never given back.</li>
 * </ul>
 *
 * <p>Lifetime: the memory is unmapped (or freed) only when {@link #buffer}
 * and every view of it are unreachable (the JDK's cleaners), never
 * explicitly. Whoever touches the memory by address holds this object (the
 * ring does, and a sender holds its connection, hence the ring, until it
 * has published), so a late writer can never meet unmapped memory:
 * unmapping early instead would need every writer, the selector's socket
 * writes and the pump's copies proven done.
 */
public final class RingMemory {
    private static final Logger LOG = Logger.getLogger(RingMemory.class.getName());
    /**
     * What the file rings of this JVM not yet closed may still commit (their
     * size less what they hold): the tmpfs room they count on. A new file
     * ring is made only if the tmpfs has room for it on top of this.
     */
    private static final AtomicLong PROMISED = new AtomicLong();
    private static final AtomicBoolean TOLD_DIRECT = new AtomicBoolean();

    /** The whole ring; transports take their views with {@code duplicate()}. */
    public final ByteBuffer buffer;
    final long address;
    final int size;
    /** What it is for, as {@link #allocate} was told (names {@code nioRingSize}). */
    private final String what;
    /** Gives the pages back (null: cannot, or a file ring's). */
    private final Runnable releasePages;
    /** Commits bytes before the ring touches them (null: no need; see {@link #commit}). */
    private final Committer committer;
    /** A file ring's file and what it holds (null: another kind). */
    private final FileRing file;

    /** Commits ring bytes {@code [index, index + bytes)} (no wrap) before anything touches them. */
    interface Committer {
        void commit(long index, long bytes) throws IOException;
    }

    /** Memory for a test: {@code releasePages} null for memory that cannot give pages back. */
    RingMemory(ByteBuffer buffer, Runnable releasePages) {
        this(buffer, "a ring", releasePages, null, null);
    }

    /** Memory for a test that must be committed ahead ({@code committer}), and cannot give pages back. */
    RingMemory(ByteBuffer buffer, String what, Committer committer) {
        this(buffer, what, null, committer, null);
    }

    private RingMemory(ByteBuffer buffer, String what, Runnable releasePages, Committer committer, FileRing file) {
        this.buffer = buffer;
        this.address = Memory.address(buffer);
        this.size = buffer.capacity();
        this.what = what;
        this.releasePages = releasePages;
        this.committer = committer;
        this.file = file;
    }

    /**
     * {@code bytes} of ring memory for {@code what} (e.g. {@code "the ring of
     * the connection to node 3 (nioRingSize = 4194304)"}); an
     * {@link IllegalStateException} naming {@code what} and the size when it
     * cannot be had.
     */
    public static RingMemory allocate(int bytes, String what) {
        if (Pages.available()) {
            return mapped(bytes, what);
        }
        Path dir = FilePages.directory();
        return allocate(bytes, what, dir, dir == null ? -1 : FilePages.room(dir));
    }

    /**
     * Without {@link Pages}: a file ring in {@code dir} if its tmpfs has
     * {@code room} for it beside the other file rings' promise, else direct
     * memory (an {@link IllegalStateException} naming {@code what}, the
     * direct-memory limit and why no file ring was made, if that fails too).
     */
    static RingMemory allocate(int bytes, String what, Path dir, long room) {
        String noFile;
        if (dir == null) {
            noFile = "file rings are off (-D" + FilePages.DIRECTORY_PROPERTY + " is empty)";
        } else if (room < 0) {
            noFile = dir + " is not a tmpfs directory";
        } else {
            noFile = null;
            while (true) {
                long p = PROMISED.get();
                if (room - p < bytes) {
                    noFile = dir + " has " + room + " bytes free, and the file rings of this JVM may still take " + p;
                    break;
                }
                if (PROMISED.compareAndSet(p, p + bytes)) {
                    break;
                }
            }
            if (noFile == null) {
                try {
                    FilePages pages = FilePages.map(dir, bytes);
                    FileRing f = new FileRing(pages, dir, bytes);
                    return new RingMemory(pages.buffer, what, null, f::commit, f);
                } catch (IOException | RuntimeException e) {
                    PROMISED.addAndGet(-bytes);
                    noFile = "no file in " + dir + ": " + e;
                }
            }
        }
        ByteBuffer b;
        try {
            b = DirectMemory.allocate(bytes, what);
        } catch (IllegalStateException e) {
            throw new IllegalStateException(e.getMessage() + "; not in a file either: " + noFile, e);
        }
        if (TOLD_DIRECT.compareAndSet(false, true)) {
            LOG.log(dir == null || room < 0 ? Level.CONFIG : Level.WARNING, "send rings (nioRingSize) in direct memory, "
                    + "resident in full and never given back: " + noFile);
        }
        return new RingMemory(b, what, null, null, null);
    }

    /** Mapped memory ({@link Pages#available} must be true); {@code bytes} beyond an int fail as the kernel refuses. */
    static RingMemory mapped(long bytes, String what) {
        ByteBuffer b;
        try {
            b = Pages.map(bytes);
        } catch (IllegalStateException e) {
            throw new IllegalStateException(what + " cannot be mapped: " + e.getMessage(), e);
        }
        long a = Memory.address(b);
        return new RingMemory(b, what, () -> Pages.release(a, bytes), null, null);
    }

    /** What the file rings not yet closed may still commit ({@link #PROMISED}; for tests). */
    static long promised() {
        return PROMISED.get();
    }

    /** True if its pages can be given back (mapped memory or a file ring). */
    public boolean releasable() {
        return releasePages != null || file != null;
    }

    /** True for memory whose bytes are committed ({@link #commit}) before anything touches them (a file ring). */
    boolean commitsAhead() {
        return committer != null;
    }

    /**
     * Commits ring bytes {@code [index, index + bytes)} (wrapping at the end)
     * before anything touches them; a {@link CommitFailed} naming what the
     * ring is for when the memory cannot be had. The caller excludes
     * {@link #releasePages} and other commits, and commits only bytes not
     * committed since the last release (see {@link OutgoingRingBuffer}).
     */
    void commit(long index, long bytes) {
        long first = Math.min(bytes, size - index);
        try {
            committer.commit(index, first);
            if (first < bytes) {
                committer.commit(0, bytes - first);
            }
        } catch (IOException e) {
            throw new CommitFailed(what + " cannot take " + bytes + " more bytes of memory (" + e.getMessage()
                    + (file == null ? "" : "; a file in " + file.dir) + ")", e);
        }
    }

    /**
     * Gives the pages back; the caller excludes every writer and
     * {@link #commit} (see {@link OutgoingRingBuffer#releaseIfIdle}). False if
     * nothing changed; an {@link IllegalStateException} if the memory must
     * never be touched again (a file ring left truncated).
     */
    boolean releasePages() {
        if (file != null) {
            return file.release();
        }
        releasePages.run();
        return true;
    }

    /** The ring is closed: a file ring closes its file (no {@link #commit} or release after it). */
    void close() {
        if (file != null) {
            file.close();
        }
    }

    /**
     * Bytes resident now (whole pages): the size for direct memory, what was
     * committed since the last release for a file ring, -1 if it cannot be
     * told.
     */
    public long resident() {
        if (file != null) {
            return file.committed;
        }
        return releasePages != null ? Pages.resident(address, size) : size;
    }

    /** A file ring could not commit the memory a record needs: its message names the ring and {@code nioRingSize}. */
    public static final class CommitFailed extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        CommitFailed(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** The file of a file ring, what it holds and its share of {@link #PROMISED}. Guarded by the ring's commit lock. */
    private static final class FileRing {
        final FilePages pages;
        final Path dir;
        final long size;
        /** Bytes committed since the last release (a gauge for any thread). */
        volatile long committed;
        boolean closed;

        FileRing(FilePages pages, Path dir, long size) {
            this.pages = pages;
            this.dir = dir;
            this.size = size;
        }

        void commit(long index, long bytes) throws IOException {
            if (closed) {
                throw new IOException("the ring is closed");
            }
            pages.commit(index, bytes); // a failure may leave a part committed: zeros, freed by the next release
            committed += bytes;
            PROMISED.addAndGet(-bytes);
        }

        boolean release() {
            if (closed || !pages.release()) {
                return false;
            }
            PROMISED.addAndGet(committed);
            committed = 0;
            return true;
        }

        void close() {
            if (!closed) {
                closed = true;
                PROMISED.addAndGet(-(size - committed));
                pages.close();
            }
        }
    }
}
