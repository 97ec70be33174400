package io.ibdxnet.soak;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Checks {@link Soak.Numbered} messages as they arrive at one set of
 * receivers: per (receiver, sender node, sender thread) the next expected
 * sequence number, and counts of verified, duplicated, reordered (a gap:
 * something earlier is missing or late) and corrupted messages. Each
 * receiver's part must be touched by one handler thread only.
 */
final class SequenceChecker {
    private final long[][][] expected;
    final AtomicLong verified = new AtomicLong();
    final AtomicLong duplicated = new AtomicLong();
    final AtomicLong reordered = new AtomicLong();
    final AtomicLong corrupted = new AtomicLong();

    SequenceChecker(int nodes, int threads) {
        expected = new long[nodes][nodes][threads];
    }

    /** Checks {@code x}, received by node {@code receiver}. */
    void check(int receiver, Soak.Numbered x) {
        long[] exp = expected[receiver][x.sender];
        if (x.seq < exp[x.thread]) {
            duplicated.incrementAndGet();
        } else if (x.seq > exp[x.thread]) {
            reordered.incrementAndGet();
        }
        if (Soak.Numbered.crc(x.data) != x.crc || x.getSource() != x.sender) {
            corrupted.incrementAndGet();
        }
        exp[x.thread] = Math.max(exp[x.thread], x.seq + 1);
        verified.incrementAndGet();
    }

    /** Fills the counts of {@code r}, whose {@code sent} is set. */
    void report(Soak.Report r) {
        r.verified = verified.get();
        r.duplicated = duplicated.get();
        r.reordered = reordered.get();
        r.corrupted = corrupted.get();
        r.lost = Math.max(0, r.sent - (r.verified - r.duplicated));
    }
}
