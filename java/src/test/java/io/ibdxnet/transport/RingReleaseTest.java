package io.ibdxnet.transport;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.TestSupport;
import io.ibdxnet.memory.FilePages;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.Pages;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * An idle ring gives its pages back ({@link OutgoingRingBuffer#releaseIfIdle},
 * {@link RingMemory}): producers racing the release lose nothing, and the
 * ring reads zero and works on afterwards.
 */
public class RingReleaseTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    private static final int CAPACITY = 64 << 10;
    private static final int PRODUCERS = 4;
    private static final int RECORDS = 20_000;

    /**
     * Mapped memory is what the JDK 22+ run must use (the multi-release jar);
     * the base run (JDK 17) a file in /dev/shm where that is a tmpfs with
     * room, else direct memory. A fresh ring holds no page either way but the
     * last.
     */
    @Test
    public void theFfmRunMapsRingsAndTheBaseRunUsesAFile() {
        String impl = System.getProperty("test.memoryImplementation", Memory.implementation());
        assertEquals(impl.equals("ffm"), Pages.available());
        RingMemory m = RingMemory.allocate(CAPACITY, "a test ring");
        java.nio.file.Path shm = FilePages.directory();
        boolean file = !Pages.available() && shm != null && FilePages.room(shm) >= 1L << 30;
        if (Pages.available() || file) {
            assertTrue(m.releasable());
            assertEquals("a file ring, committed ahead", file, m.commitsAhead());
        } else {
            assertFalse(m.releasable());
        }
        assertEquals(CAPACITY, m.buffer.capacity());
        if (m.releasable()) {
            assertEquals("a fresh ring has no page resident", 0, m.resident());
        } else {
            assertEquals(CAPACITY, m.resident());
        }
        new OutgoingRingBuffer(m).close(); // a file ring's file closed
    }

    /** A mapping the kernel refuses (more than the address space) fails naming what it was for, the size and errno. */
    @Test
    public void aRingThatCannotBeMappedSaysWhatAndHowLarge() {
        Assume.assumeTrue("mapped rings need JDK 22+", Pages.available());
        long huge = 1L << 48;
        try {
            RingMemory.mapped(huge, "the ring of the connection to node 7 (nioRingSize = " + huge + ")");
            fail("mapped " + huge + " bytes");
        } catch (IllegalStateException e) {
            assertEquals("the ring of the connection to node 7 (nioRingSize = 281474976710656) cannot be mapped: "
                    + "mmap of 281474976710656 bytes failed (errno 12, ENOMEM: no address space or memory left)",
                    e.getMessage());
        }
    }

    /**
     * A mapped ring no longer reachable is unmapped (the JDK's automatic
     * arena): connections that come and go do not leak address space.
     * {@code mincore} fails on a range that is no longer mapped.
     */
    @Test
    public void anUnreachableRingIsUnmapped() throws Exception {
        Assume.assumeTrue("mapped rings need JDK 22+", Pages.available());
        int size = 64 << 20;
        long a = mapAndWrite(size);
        assertTrue("mapped and partly resident", Pages.resident(a, size) > 0);
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (Pages.resident(a, size) != -1) {
            assertTrue("still mapped after 30 s of collections", System.nanoTime() - until < 0);
            System.gc();
            Thread.sleep(20);
        }
    }

    /** Maps a ring, writes its first page, drops every reference; returns its address. */
    private static long mapAndWrite(int size) throws Exception {
        RingMemory m = RingMemory.allocate(size, "a test ring");
        OutgoingRingBuffer orb = new OutgoingRingBuffer(m);
        long pos = orb.reserve(8, System.nanoTime() + TimeUnit.SECONDS.toNanos(10));
        orb.publish(pos, 8);
        return m.address;
    }

    /**
     * Releases zero the ring slowly (page by page, yielding), as if the
     * kernel dropped its pages while producers write: a producer writing
     * during a release would lose its record or leave garbage. Several
     * producers write numbered records in bursts (the ring goes idle between
     * them); the send thread (here the consumer) releases whenever the ring
     * is idle and checks every record, in order per producer.
     */
    @Test
    public void producersRacingSlowReleasesLoseNothing() throws Exception {
        ByteBuffer b = ByteBuffer.allocateDirect(CAPACITY);
        long a = Memory.address(b);
        AtomicInteger zeroings = new AtomicInteger();
        RingMemory m = new RingMemory(b, () -> {
            zeroings.incrementAndGet();
            for (int i = 0; i < CAPACITY; i += 4096) {
                Memory.fill(a + i, 4096, (byte) 0);
                Thread.yield();
            }
        });
        int releases = race(new OutgoingRingBuffer(m));
        assertEquals(releases, zeroings.get());
        assertTrue("the ring was idle and released often (" + releases + ")", releases >= 20);
    }

    /**
     * The same with the kernel's release: {@code madvise} (mapped memory, JDK
     * 22+) or truncation (a file ring, JDK 17); direct memory is never released.
     */
    @Test
    public void producersRacingPageReleasesLoseNothing() throws Exception {
        RingMemory m = RingMemory.allocate(CAPACITY, "a test ring");
        int releases = race(new OutgoingRingBuffer(m));
        if (m.releasable()) {
            assertTrue("the ring was idle and released often (" + releases + ")", releases >= 20);
        } else {
            assertEquals(0, releases);
        }
    }

    /** Runs the producers and the consumer ({@link RingRace}); returns how many releases happened meanwhile. */
    private static int race(OutgoingRingBuffer orb) throws Exception {
        return RingRace.run(orb, RingRace.GUARDED, PRODUCERS, RECORDS, TimeUnit.SECONDS.toNanos(30));
    }

    private static byte[] body(int id, int seq, int n) {
        return RingRace.body(id, seq, n);
    }

    private static int readInt(byte[] b, int off) {
        return RingRace.readInt(b, off);
    }

    /**
     * A ring written all round (several pages resident), then idle for the
     * release period: its pages are given back (none resident), it reads
     * zero — also where something was left behind in free space — and
     * records written afterwards across its end arrive intact.
     */
    @Test
    public void afterAReleaseTheRingReadsZeroAndWorksAcrossItsEnd() throws Exception {
        RingMemory m = RingMemory.allocate(CAPACITY, "a test ring");
        OutgoingRingBuffer orb = new OutgoingRingBuffer(m);
        long forever = System.nanoTime() + TimeUnit.MINUTES.toNanos(10);
        // fill and drain the ring round once and a half: every page touched
        int written = 0;
        int seq = 0;
        while (written < CAPACITY + CAPACITY / 2) {
            byte[] body = body(0, seq++, 1000);
            long pos = orb.reserve(4 + body.length, forever);
            orb.write(pos + 4, body, 0, body.length);
            orb.publish(pos, 4 + body.length);
            long ready = orb.readyToPost();
            orb.posted(ready);
            orb.confirmed(ready);
            written += OutgoingRingBuffer.aligned(4 + body.length);
        }
        long t0 = System.nanoTime();
        assertFalse("not idle long enough yet", orb.releaseIfIdle(t0, OutgoingRingBuffer.RELEASE_AFTER_NANOS));
        if (!m.releasable()) {
            assertFalse(orb.releaseIfIdle(t0 + OutgoingRingBuffer.RELEASE_AFTER_NANOS, OutgoingRingBuffer.RELEASE_AFTER_NANOS));
            assertEquals(CAPACITY, orb.resident());
        } else {
            assertEquals("every page was written", CAPACITY, orb.resident());
            // bytes left in free space (a protocol breach the release must also wipe)
            for (int i = 0; i < CAPACITY; i += 512) {
                Memory.putLong(m.address + i, 0x0123456789abcdefL);
            }
            assertTrue(orb.releaseIfIdle(t0 + OutgoingRingBuffer.RELEASE_AFTER_NANOS, OutgoingRingBuffer.RELEASE_AFTER_NANOS));
            assertFalse("released once per idle spell",
                    orb.releaseIfIdle(t0 + 3 * OutgoingRingBuffer.RELEASE_AFTER_NANOS, OutgoingRingBuffer.RELEASE_AFTER_NANOS));
            assertEquals("no page resident after the release", 0, orb.resident());
            for (int i = 0; i < CAPACITY; i += 8) {
                assertEquals("byte " + i + " after the release", 0, Memory.getLong(m.address + i));
            }
        }
        // records across the ring's end: the release left a working ring
        for (int k = 0; k < 20; k++) {
            byte[] body = body(1, k, 5000 + k * 13);
            long pos = orb.reserve(4 + body.length, forever);
            orb.write(pos + 4, body, 0, body.length);
            orb.publish(pos, 4 + body.length);
            long ready = orb.readyToPost();
            assertEquals(OutgoingRingBuffer.aligned(4 + body.length), ready);
            byte[] data = orb.copyStranded(); // everything earlier was posted whole: the ready bytes
            assertEquals(4 + body.length, readInt(data, 0));
            assertArrayEquals(body, java.util.Arrays.copyOfRange(data, 4, 4 + body.length));
            orb.posted(ready);
            orb.confirmed(ready);
        }
        assertTrue("the records crossed the end", written + 20 * 5000 > 2 * CAPACITY);
    }
}
