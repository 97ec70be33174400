package io.ibdxnet.transport;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.ChildJvm;
import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.TestSupport;
import io.ibdxnet.memory.FilePages;
import io.ibdxnet.memory.Memory;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * File rings ({@link RingMemory} over {@link FilePages}: an unlinked file in
 * /dev/shm, what JDK 17–21 use; tested on every JDK): pages committed ahead
 * of the producers and no further, given back by truncation while producers
 * are kept out, a full tmpfs an error naming {@code nioRingSize}, and direct
 * memory where there is no tmpfs or no room.
 */
public class RingFileTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    private static final long FOREVER = System.nanoTime() + TimeUnit.HOURS.toNanos(1);
    private static final int PAGE = 4096;

    /** A file ring of {@code bytes} in /dev/shm (the test is skipped where that is no tmpfs with room). */
    private static RingMemory fileRing(int bytes) {
        Path dir = FilePages.directory();
        Assume.assumeTrue("/dev/shm is a tmpfs", dir != null && FilePages.room(dir) >= 1L << 30);
        RingMemory m = RingMemory.allocate(bytes, "a test ring", dir, FilePages.room(dir));
        assertTrue("a file ring", m.commitsAhead() && m.releasable());
        return m;
    }

    /** Pages of the ring's file in memory ({@code mincore}, one page at a time: a shared mapping sees the file's pages). */
    private static int pagesHeld(RingMemory m) {
        int n = 0;
        for (int off = 0; off < m.size; off += PAGE) {
            if (((MappedByteBuffer) m.buffer.slice(off, PAGE)).isLoaded()) {
                n++;
            }
        }
        return n;
    }

    /** Writes records of {@code recordSize} bytes up to {@code bytes} in all, each drained at once. */
    private static void stream(OutgoingRingBuffer orb, long bytes, int recordSize) throws Exception {
        int seq = 0;
        for (long written = 0; written < bytes; written += OutgoingRingBuffer.aligned(recordSize)) {
            byte[] body = RingRace.body(0, seq++, recordSize - 12);
            long pos = orb.reserve(4 + body.length, FOREVER);
            orb.write(pos + 4, body, 0, body.length);
            orb.publish(pos, 4 + body.length);
            long ready = orb.readyToPost();
            byte[] data = orb.copyStranded();
            assertArrayEquals(body, java.util.Arrays.copyOfRange(data, 4, 4 + body.length));
            orb.posted(ready);
            orb.confirmed(ready);
        }
    }

    /**
     * A fresh file ring holds no page; a small record commits
     * {@link OutgoingRingBuffer#MIN_COMMIT}, a stream commits in doubling
     * steps until the whole ring is; the file holds exactly the pages the
     * ring counts (a page touched beyond them shows: the control); after an
     * idle second none, and every position has moved on by one capacity.
     */
    @Test
    public void aFileRingCommitsAheadOfItsProducersAndGivesItAllBack() throws Exception {
        int capacity = 1 << 20;
        RingMemory m = fileRing(capacity);
        OutgoingRingBuffer orb = new OutgoingRingBuffer(m);
        assertEquals(0, m.resident());
        assertEquals(0, pagesHeld(m));
        stream(orb, 100, 100);
        assertEquals(OutgoingRingBuffer.MIN_COMMIT, m.resident());
        assertEquals("the pages committed, no more", OutgoingRingBuffer.MIN_COMMIT / PAGE, pagesHeld(m));
        // The control: a touch of a page the ring has not committed is seen (and wiped by its commit later).
        // Safe: inside the mapping, which m keeps; the file has its full length (a hole: the touch allocates the
        // page; /dev/shm has room), and nothing truncates it meanwhile (this thread is the only one).
        Memory.putByte(m.address + 8 * PAGE + 100, (byte) 1);
        assertEquals(OutgoingRingBuffer.MIN_COMMIT / PAGE + 1, pagesHeld(m));
        stream(orb, 40 << 10, 1000);
        assertEquals(64 << 10, m.resident()); // 16 KiB, then 16 more, then 32
        assertEquals(m.resident() / PAGE, pagesHeld(m));
        stream(orb, capacity + (capacity >> 1), 16 << 10);
        assertEquals(capacity, m.resident());
        assertEquals(capacity / PAGE, pagesHeld(m));

        long reserved = orb.reservedPosition();
        long t0 = System.nanoTime();
        assertFalse(orb.releaseIfIdle(t0, OutgoingRingBuffer.RELEASE_AFTER_NANOS));
        assertTrue(orb.releaseIfIdle(t0 + OutgoingRingBuffer.RELEASE_AFTER_NANOS, OutgoingRingBuffer.RELEASE_AFTER_NANOS));
        assertEquals(0, m.resident());
        assertEquals("the file holds no page after the release", 0, pagesHeld(m));
        assertEquals("positions moved on: a reservation read before fails its CAS", reserved + capacity,
                orb.reservedPosition());
        assertEquals(reserved + capacity, orb.frontPosition());
        stream(orb, 100, 100);
        assertEquals(OutgoingRingBuffer.MIN_COMMIT, m.resident());
        assertEquals(OutgoingRingBuffer.MIN_COMMIT / PAGE, pagesHeld(m));
        long promised = RingMemory.promised();
        orb.close();
        assertEquals("closing gives back what the ring had not committed", promised - (capacity - m.resident()),
                RingMemory.promised());
    }

    /**
     * Four producers against a consumer that releases whenever the ring is
     * idle ({@link RingRace}), on a file ring: each release truncates the
     * file, each burst after it commits anew. Every record arrives intact and
     * in order, no producer touched a truncated page (that would be an
     * {@link InternalError} or a crash), and at the end the file holds
     * exactly the pages the ring counts: nothing was touched before it was
     * committed. {@link #aReleaseWithoutTheExclusionIsCaught} is its
     * negative control.
     */
    @Test
    public void producersRacingCommitsAndTruncationsLoseNothing() throws Exception {
        RingMemory m = fileRing(64 << 10);
        OutgoingRingBuffer orb = new OutgoingRingBuffer(m);
        int releases = RingRace.run(orb, RingRace.GUARDED, 4, 20_000, TimeUnit.SECONDS.toNanos(30));
        assertTrue("the ring was idle and released often (" + releases + ")", releases >= 20);
        assertEquals(m.resident() / PAGE, pagesHeld(m));
    }

    /**
     * The negative control of the race above: the same producers against a
     * consumer that truncates the file whenever the ring looks drained,
     * without the flag that keeps producers out. In a child JVM (a producer
     * may touch the file while it is truncated: a SIGBUS); the child must
     * report a lost, garbled or failed record, or die.
     */
    @Test
    public void aReleaseWithoutTheExclusionIsCaught() throws Exception {
        fileRing(PAGE); // skipped without a tmpfs, as the child would be
        ChildJvm.Result r = ChildJvm.run(UnguardedChild.class, List.of(), List.of(), 90_000);
        assertFalse(r.output, r.output.contains("undetected"));
        assertNotEquals(r.output, 0, r.exit);
    }

    /** {@link #aReleaseWithoutTheExclusionIsCaught}'s child: prints what the race caught, exits 1; "undetected", 0. */
    public static final class UnguardedChild {
        public static void main(String[] args) throws Exception {
            Path dir = FilePages.directory();
            RingMemory m = RingMemory.allocate(64 << 10, "a test ring", dir, FilePages.room(dir));
            OutgoingRingBuffer orb = new OutgoingRingBuffer(m);
            try {
                int releases = RingRace.run(orb, o -> o.isDrained() && m.releasePages(), 4, 20_000,
                        TimeUnit.SECONDS.toNanos(2));
                System.out.println("undetected after " + releases + " releases");
                System.exit(0);
            } catch (Throwable e) {
                System.out.println("caught: " + e + (e.getCause() == null ? "" : " caused by " + e.getCause()));
                System.exit(1);
            }
        }
    }

    /**
     * A tmpfs that is full when the ring needs more of it: the reservation
     * fails with {@link RingMemory.CommitFailed} naming the ring and
     * {@code nioRingSize}, nothing is reserved, a send fails with
     * {@link FailureReason#RESOURCES} and the same words and keeps nothing
     * in the window; once there is room again the ring works.
     */
    @Test
    public void aFullTmpfsFailsTheSendNamingTheKeyAndReservesNothing() throws Exception {
        AtomicBoolean full = new AtomicBoolean(true);
        String what = "the ring of the connection to node 3 (nioRingSize = 65536)";
        RingMemory m = new RingMemory(ByteBuffer.allocateDirect(64 << 10), what, (index, bytes) -> {
            if (full.get()) {
                throw new IOException("No space left on device");
            }
        });
        OutgoingRingBuffer orb = new OutgoingRingBuffer(m);
        try {
            orb.reserve(100, FOREVER);
            fail("reserved without memory");
        } catch (RingMemory.CommitFailed e) {
            assertEquals(what + " cannot take 16384 more bytes of memory (No space left on device)", e.getMessage());
        }
        assertEquals(0, orb.reservedPosition());
        assertEquals(OutgoingRingBuffer.FULL, orb.tryReserve(100));
        RingConnection c = new RingConnection(3, orb, new FlowWindow(1 << 20, 1));
        byte[] header = new byte[8];
        byte[] payload = new byte[100];
        try {
            c.write(header, payload, 0, payload.length, FOREVER, false);
            fail("sent without memory");
        } catch (NetworkException e) {
            assertEquals(FailureReason.RESOURCES, e.reason());
            assertTrue(e.getMessage(), e.getMessage().startsWith(what + " cannot take"));
        }
        assertEquals("nothing kept in the window", 0, c.flow.unconfirmed());
        assertEquals(0, c.writers.get());
        assertFalse(c.tryWrite(header, payload, 0, payload.length));
        full.set(false);
        assertTrue(c.write(header, payload, 0, payload.length, FOREVER, false));
        assertEquals(OutgoingRingBuffer.aligned(header.length + payload.length), orb.readyToPost());
    }

    /**
     * Direct memory, resident in full, where no file ring can be had: no such
     * directory, a directory on a disk, file rings off (the property empty),
     * or a tmpfs without room for one more ring beside what the file rings of
     * this JVM were promised.
     */
    @Test
    public void withoutATmpfsOrItsRoomTheRingIsDirectMemory() throws Exception {
        Path missing = Paths.get("/nonexistent-ibdxnet-" + System.nanoTime());
        assertEquals(-1, FilePages.room(missing));
        assertDirect(RingMemory.allocate(8192, "a test ring", missing, FilePages.room(missing)));
        assertDirect(RingMemory.allocate(8192, "a test ring", null, -1));
        Path disk = Files.createTempDirectory("ibdxnet-ring-test");
        try {
            if (!Files.getFileStore(disk).type().equals("tmpfs")) {
                assertEquals(-1, FilePages.room(disk));
                assertDirect(RingMemory.allocate(8192, "a test ring", disk, FilePages.room(disk)));
            }
        } finally {
            Files.delete(disk);
        }
        Path shm = FilePages.directory();
        Assume.assumeTrue("/dev/shm is a tmpfs", shm != null && FilePages.room(shm) >= 1L << 30);
        int size = 64 << 10;
        long promised = RingMemory.promised();
        long room = promised + 2L * size + 100; // room for two more rings, not three
        RingMemory a = RingMemory.allocate(size, "a test ring", shm, room);
        RingMemory b = RingMemory.allocate(size, "a test ring", shm, room);
        assertTrue(a.commitsAhead() && b.commitsAhead());
        assertEquals(promised + 2L * size, RingMemory.promised());
        assertDirect(RingMemory.allocate(size, "a test ring", shm, room));
        OutgoingRingBuffer ra = new OutgoingRingBuffer(a);
        stream(ra, 100, 100);
        assertEquals("what a ring commits is no longer promised", promised + 2L * size - OutgoingRingBuffer.MIN_COMMIT,
                RingMemory.promised());
        ra.close();
        new OutgoingRingBuffer(b).close();
        assertEquals(promised, RingMemory.promised());
    }

    private static void assertDirect(RingMemory m) {
        assertFalse(m.releasable());
        assertFalse(m.commitsAhead());
        assertEquals(m.size, m.resident());
    }
}
