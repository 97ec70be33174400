package io.ibdxnet.transport;

import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * How every Java thread of the stack waits, for a change (ring space, a flow
 * control window, a receiver that refused) or for work: one type, up to three
 * phases, every parameter named here once (after Aeron's
 * {@code BackoffIdleStrategy}).
 *
 * <ol>
 * <li><b>spin</b>: up to {@link #SPINS} calls of {@link Thread#onSpinWait} —
 * the cause of a sender's wait often goes away within microseconds;</li>
 * <li><b>yield</b>: {@link Thread#yield} for up to {@link #YIELD_NANOS} — an idle
 * thread about to block stays cheap to hand work to: a blocked thread costs
 * whoever hands it work a wake-up system call and the work a scheduling
 * delay, which on a machine with few cores dominates a round trip;</li>
 * <li><b>park</b>: {@link LockSupport#parkNanos} {@link #FIRST_PARK_NS} at a
 * time — a streaming sender waits like this all the time, and polling
 * batches its wake-ups — and once the wait has lasted {@link #PATIENCE_NS},
 * for a time that doubles up to {@link #MAX_PARK_NS}, on a {@link WaitList}
 * where the change is signalled (so the longer park ends with the change).
 * A long wait then costs about a thousand wake-ups per second instead of
 * tens of thousands, which matters when dozens of senders wait at once on
 * two cores; where nobody signals, it may end up to {@link #MAX_PARK_NS}
 * late.</li>
 * </ol>
 *
 * The presets: {@link #waiter} (spin, then park: a sender waiting for a
 * change), {@link #parkingOnly} (park from the first pause: a loop with other
 * work to look at between pauses) and {@link #beforeBlocking} (yield, then
 * {@link #idle} returns false and the caller blocks on its own signal — a
 * queue's take, a selector, an unpark — which is not a back-off: it ends with
 * the work). One instance per wait, used by one thread; {@link #reset} after
 * progress.
 */
public final class IdleStrategy {
    /** The phase the next {@link #idle} is in. */
    public enum Phase {
        /** {@link Thread#onSpinWait}. */
        SPIN,
        /** {@link Thread#yield}. */
        YIELD,
        /** {@link LockSupport#parkNanos}, growing after {@link #PATIENCE_NS}. */
        PARK,
        /** Over ({@link #beforeBlocking}): the caller blocks on its own signal. */
        BLOCK
    }

    /** Spins of a {@link #waiter} before it parks. */
    public static final int SPINS = 100;
    /** How long an idle thread yields before it blocks ({@link #beforeBlocking}). */
    public static final long YIELD_NANOS = 50_000;
    /** A short wait polls at this interval. */
    public static final long FIRST_PARK_NS = 20_000;
    /** How long a wait polls before its parks grow. */
    public static final long PATIENCE_NS = 2_000_000;
    /** The longest park: what a long wait may add after its cause went away. */
    public static final long MAX_PARK_NS = 1_000_000;

    private final int maxSpins;
    private final long maxYieldNs;
    private final boolean parks;
    private int spins;
    private long yieldingSince;
    private boolean yieldOver;
    private long parkingSince;
    private long parkNs = FIRST_PARK_NS;

    private IdleStrategy(int maxSpins, long maxYieldNs, boolean parks) {
        this.maxSpins = maxSpins;
        this.maxYieldNs = maxYieldNs;
        this.parks = parks;
    }

    /** Spins, then parks (no yield phase): a thread waiting for a change. */
    public static IdleStrategy waiter() {
        return new IdleStrategy(SPINS, 0, true);
    }

    /** Parks from the first pause on (for a waiter with other work to look at between pauses). */
    public static IdleStrategy parkingOnly() {
        return new IdleStrategy(0, 0, true);
    }

    /** Yields for {@link #YIELD_NANOS}, then is over: the caller blocks on its own signal. */
    public static IdleStrategy beforeBlocking() {
        return new IdleStrategy(0, YIELD_NANOS, false);
    }

    /**
     * Waits a little: a spin, a yield or a park, by phase.
     *
     * @return false once a strategy without a park phase is over (nothing was done: block now)
     */
    public boolean idle() {
        if (spin() || yieldAWhile()) {
            return true;
        }
        if (!parks) {
            return false;
        }
        LockSupport.parkNanos(nextPark());
        return true;
    }

    /**
     * Waits a little for {@code ready}: a spin, a yield, a short park, or (a
     * long wait) a park on {@code list}, ended early by its {@link WaitList#signal}.
     */
    public void idle(WaitList list, BooleanSupplier ready) {
        if (spin() || yieldAWhile()) {
            return;
        }
        long park = nextPark();
        if (park == FIRST_PARK_NS) {
            LockSupport.parkNanos(park); // polling: no registration, signals cost nothing
        } else {
            list.park(park, ready);
        }
    }

    private boolean spin() {
        if (spins < maxSpins) {
            spins++;
            Thread.onSpinWait();
            return true;
        }
        return false;
    }

    private boolean yieldAWhile() {
        if (yieldOver || maxYieldNs == 0) {
            return false;
        }
        long now = System.nanoTime();
        if (yieldingSince == 0) {
            yieldingSince = now | 1;
        } else if (now - yieldingSince >= maxYieldNs) {
            yieldOver = true;
            return false;
        }
        Thread.yield();
        return true;
    }

    /** This park's length; longer ones once the wait outlasted {@link #PATIENCE_NS}. */
    private long nextPark() {
        long now = System.nanoTime();
        if (parkingSince == 0) {
            parkingSince = now | 1;
        }
        long park = parkNs;
        if (now - parkingSince >= PATIENCE_NS) {
            parkNs = Math.min(MAX_PARK_NS, parkNs * 2);
        }
        return park;
    }

    /** The phase the next {@link #idle} is in (the yield phase may end at that call, by the clock). */
    public Phase phase() {
        if (spins < maxSpins) {
            return Phase.SPIN;
        }
        if (!yieldOver && maxYieldNs != 0) {
            return Phase.YIELD;
        }
        return parks ? Phase.PARK : Phase.BLOCK;
    }

    /** True once spinning and yielding are over (the next {@link #idle} parks, or blocking is due). */
    public boolean parking() {
        Phase p = phase();
        return p == Phase.PARK || p == Phase.BLOCK;
    }

    /** Progress was made: the next wait starts again with its first phase. */
    public void reset() {
        spins = 0;
        yieldingSince = 0;
        yieldOver = false;
        parkingSince = 0;
        parkNs = FIRST_PARK_NS;
    }

    /** The next park, in nanoseconds (for tests). */
    long nextParkNs() {
        return parkNs;
    }

    /**
     * Polls {@code poll} through a {@link #beforeBlocking} strategy's phases
     * (yielding in between, for at most {@link #YIELD_NANOS}); its last
     * result (null: block now).
     */
    public static <T> T poll(Supplier<T> poll) {
        T t = poll.get();
        if (t != null) {
            return t;
        }
        IdleStrategy s = beforeBlocking();
        while (s.idle()) {
            t = poll.get();
            if (t != null) {
                return t;
            }
        }
        return null;
    }

    /** Waits through a {@link #beforeBlocking} strategy's phases until {@code ready} holds; whether it held. */
    public static boolean until(BooleanSupplier ready) {
        if (ready.getAsBoolean()) {
            return true;
        }
        IdleStrategy s = beforeBlocking();
        while (s.idle()) {
            if (ready.getAsBoolean()) {
                return true;
            }
        }
        return false;
    }
}
