package io.ibdxnet.core;

import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * The first stage of every idle Java thread of the stack: yield for a moment
 * before blocking. A blocked thread costs whoever hands it work a wake-up
 * system call and the work a scheduling delay; on a machine with few cores
 * that dominates a round trip.
 */
public final class IdleYield {
    /** How long an idle thread yields before it blocks. */
    public static final long NANOS = 50_000;

    private IdleYield() {
    }

    /** Polls {@code poll}, yielding in between, for at most {@link #NANOS}; its last result (null: block now). */
    public static <T> T poll(Supplier<T> poll) {
        T t = poll.get();
        if (t != null) {
            return t;
        }
        long start = System.nanoTime();
        do {
            Thread.yield();
            t = poll.get();
        } while (t == null && System.nanoTime() - start < NANOS);
        return t;
    }

    /** Yields until {@code ready} holds, for at most {@link #NANOS}; whether it held. */
    public static boolean until(BooleanSupplier ready) {
        if (ready.getAsBoolean()) {
            return true;
        }
        long start = System.nanoTime();
        do {
            Thread.yield();
            if (ready.getAsBoolean()) {
                return true;
            }
        } while (System.nanoTime() - start < NANOS);
        return false;
    }
}
