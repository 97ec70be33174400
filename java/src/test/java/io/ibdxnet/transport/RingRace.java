package io.ibdxnet.transport;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * Producers racing a ring's releases (RingReleaseTest, RingFileTest):
 * several producers write numbered records in bursts (the ring goes idle
 * between them); the consumer (the send thread) releases whenever the ring
 * is idle, the way {@link Release} says, and checks every record, in order
 * per producer. A record lost to a release stalls the ring; one garbled
 * fails its comparison; a producer that failed (an {@link InternalError}
 * from a touch of a truncated file, say) fails the run.
 */
final class RingRace {
    private RingRace() {}

    /** What the consumer does whenever nothing is ready; true if it gave pages back. */
    interface Release {
        boolean atIdle(OutgoingRingBuffer orb);
    }

    /** The ring's own release ({@link OutgoingRingBuffer#releaseIfIdle}, no idle period). */
    static final Release GUARDED = orb -> orb.releaseIfIdle(System.nanoTime(), 0);

    /**
     * Runs {@code producers} × {@code records} through {@code orb}; returns
     * how many releases happened meanwhile. Fails if nothing arrives for
     * {@code stallNanos} or everything has not arrived within 30 s.
     */
    static int run(OutgoingRingBuffer orb, Release release, int producers, int records, long stallNanos) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        Producers threads = new Producers(orb, producers, records, 300, true, deadline);
        int[] next = new int[producers];
        long received = 0;
        long lastProgress = System.nanoTime();
        int releases = 0;
        try {
            while (received < (long) producers * records && threads.failure.get() == null) {
                long now = System.nanoTime();
                if (now - deadline > 0 || now - lastProgress > stallNanos) {
                    throw new AssertionError("received " + received + " of " + producers * records
                            + " records in time (a record lost to a release stalls the ring)");
                }
                long ready = orb.readyToPost();
                if (ready == 0) {
                    if (release.atIdle(orb)) {
                        releases++;
                    }
                    Thread.onSpinWait();
                    continue;
                }
                byte[] data = orb.copyStranded(); // everything earlier was posted whole: the ready bytes
                int off = 0;
                while (off < data.length) {
                    int len = readInt(data, off);
                    assertTrue("a record length at " + off + ": " + len, len >= 12 && off + len <= data.length);
                    int id = readInt(data, off + 4);
                    assertTrue("producer id " + id, id >= 0 && id < producers);
                    int seq = readInt(data, off + 8);
                    assertEquals("producer " + id + "'s next record", next[id], seq);
                    byte[] expected = body(id, seq, len - 4 - 8);
                    byte[] got = java.util.Arrays.copyOfRange(data, off + 4, off + len);
                    assertArrayEquals("record " + seq + " of producer " + id, expected, got);
                    next[id]++;
                    received++;
                    off += OutgoingRingBuffer.aligned(len);
                }
                orb.posted(off);
                orb.confirmed(off);
                lastProgress = System.nanoTime();
            }
        } finally {
            threads.stop();
        }
        return releases;
    }

    /**
     * Producers writing {@code records} numbered records each ({@link #body}
     * with 0 to {@code maxBody} more bytes) to a ring, with a pause now and
     * then if {@code pauses} (the ring may go idle); a failure is kept.
     */
    static final class Producers {
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        private final OutgoingRingBuffer orb;
        private final List<Thread> threads = new ArrayList<>();

        Producers(OutgoingRingBuffer orb, int producers, int records, int maxBody, boolean pauses, long deadline) {
            this.orb = orb;
            for (int p = 0; p < producers; p++) {
                int id = p;
                Thread t = new Thread(() -> {
                    try {
                        ThreadLocalRandom rnd = ThreadLocalRandom.current();
                        for (int seq = 0; seq < records; seq++) {
                            byte[] body = body(id, seq, rnd.nextInt(0, maxBody));
                            long pos = orb.reserve(4 + body.length, deadline);
                            assertTrue("reserved", pos >= 0);
                            orb.write(pos + 4, body, 0, body.length);
                            orb.publish(pos, 4 + body.length);
                            if (pauses && rnd.nextInt(40) == 0) {
                                LockSupport.parkNanos(rnd.nextInt(20_000, 300_000)); // a pause: the ring may go idle
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }, "producer-" + p);
                t.setDaemon(true);
                threads.add(t);
                t.start();
            }
        }

        /** Closes the ring (producers still waiting give up), joins them; fails if one failed. */
        void stop() throws InterruptedException {
            orb.close();
            for (Thread t : threads) {
                t.join(10_000);
            }
            if (failure.get() != null) {
                throw new AssertionError("a producer failed", failure.get());
            }
        }
    }

    /** Producer id, sequence number, then {@code n} bytes derived from both. */
    static byte[] body(int id, int seq, int n) {
        byte[] b = new byte[8 + n];
        ByteBuffer.wrap(b).putInt(id).putInt(seq);
        for (int i = 0; i < n; i++) {
            b[8 + i] = (byte) (id * 31 + seq * 7 + i);
        }
        return b;
    }

    static int readInt(byte[] b, int off) {
        return ByteBuffer.wrap(b, off, 4).getInt();
    }
}
