package io.ibdxnet.ib;

import static org.junit.Assume.assumeTrue;

import io.ibdxnet.TestSupport;
import java.util.Arrays;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Not a timed test: a measurement, skipped unless {@code IBDXNET_BENCH_COUNTERS=1}
 * (with {@code gradle --no-daemon}). Cost of reading every counter of the table
 * once through {@link NativeCounters} against {@link NativeEngine#stats()} (the
 * text path: one JNI call formatting the statistics map, parsed into a map),
 * interleaved round by round on one idle sim engine.
 */
public class NativeCountersCost {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    static volatile long sink;

    @Test
    public void readAllCountersOnceFlyweightVersusText() throws Exception {
        assumeTrue("set IBDXNET_BENCH_COUNTERS=1 to measure", System.getenv("IBDXNET_BENCH_COUNTERS") != null);
        int rounds = 11;
        int flyIters = 2_000_000;
        int textIters = 20_000;
        double[] fly = new double[rounds];
        double[] text = new double[rounds];
        try (NativeEngine e = NativeEngine.start(StreamCallbacks.simConfig(0), new StreamCallbacks(0, 0))) {
            NativeCounters c = e.counters();
            int n = c.size();
            System.out.println("counters-table: " + n + " slots in the table, " + e.stats().size()
                    + " entries in stats(); rounds " + rounds + ", flyweight " + flyIters + " reads of all slots, text "
                    + textIters + " stats() calls per round; java " + System.getProperty("java.version") + ", memory "
                    + io.ibdxnet.memory.Memory.implementation());
            for (int r = -2; r < rounds; r++) { // two warm-up rounds
                long t0 = System.nanoTime();
                long s = 0;
                for (int k = 0; k < flyIters; k++) {
                    for (int i = 0; i < n; i++) {
                        s += c.get(i);
                    }
                }
                long t1 = System.nanoTime();
                for (int k = 0; k < textIters; k++) {
                    Map<String, Long> m = e.stats();
                    s += m.size();
                }
                long t2 = System.nanoTime();
                sink = s;
                if (r >= 0) {
                    fly[r] = (t1 - t0) / (double) flyIters;
                    text[r] = (t2 - t1) / (double) textIters;
                    System.out.printf("counters-table: round %d flyweight_all_ns=%.1f text_stats_ns=%.0f ratio=%.0f%n", r, fly[r],
                            text[r], text[r] / fly[r]);
                }
            }
        }
        double[] f = fly.clone();
        double[] t = text.clone();
        double[] ratio = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            ratio[r] = text[r] / fly[r];
        }
        Arrays.sort(f);
        Arrays.sort(t);
        Arrays.sort(ratio);
        System.out.printf("counters-table: median flyweight_all_ns=%.1f (min %.1f max %.1f) text_stats_ns=%.0f (min %.0f max %.0f)"
                + " ratio median %.0f (min %.0f max %.0f)%n", f[rounds / 2], f[0], f[rounds - 1], t[rounds / 2], t[0], t[rounds - 1],
                ratio[rounds / 2], ratio[0], ratio[rounds - 1]);
    }
}
