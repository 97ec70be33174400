package io.ibdxnet.transport;

import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * How a thread waits (for ring space, a flow control window, a receiver
 * that refused): spin briefly, then park {@link #FIRST_PARK_NS} at a time —
 * a streaming sender waits like this all the time, and polling batches its
 * wake-ups — and once the wait has lasted {@link #PATIENCE_NS}, park for a
 * time that doubles up to {@link #MAX_PARK_NS}, on a {@link WaitList} where
 * the change is signalled (so the longer park ends with the change). A long
 * wait then costs about a thousand wake-ups per second instead of tens of
 * thousands, which matters when dozens of senders wait at once on two cores;
 * where nobody signals, it may end up to {@link #MAX_PARK_NS} late. One
 * instance per wait, used by one thread.
 */
public final class Backoff {
    static final int SPINS = 100;
    /** A short wait polls at this interval (as every wait did before this class). */
    public static final long FIRST_PARK_NS = 20_000;
    /** How long a wait polls before its parks grow. */
    public static final long PATIENCE_NS = 2_000_000;
    /** The longest park: what a long wait may add after its cause went away. */
    public static final long MAX_PARK_NS = 1_000_000;

    private final int spinsAfterReset;
    private int spins;
    private long parkingSince;
    private long parkNs = FIRST_PARK_NS;

    /** Spins first, then parks. */
    public Backoff() {
        this(0);
    }

    private Backoff(int spins) {
        this.spinsAfterReset = spins;
        this.spins = spins;
    }

    /** Parks from the first pause on (for a waiter with other work to look at between pauses). */
    public static Backoff parkingOnly() {
        return new Backoff(SPINS);
    }

    /** Waits a little: a spin, or a park. */
    public void pause() {
        if (spin()) {
            return;
        }
        LockSupport.parkNanos(nextPark());
    }

    /**
     * Waits a little for {@code ready}: a spin, a short park, or (a long
     * wait) a park on {@code list}, ended early by its {@link WaitList#signal}.
     */
    public void pause(WaitList list, BooleanSupplier ready) {
        if (spin()) {
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
        if (spins < SPINS) {
            spins++;
            Thread.onSpinWait();
            return true;
        }
        return false;
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

    /** True once spinning is over (the next {@link #pause} parks). */
    public boolean parking() {
        return spins >= SPINS;
    }

    /** Progress was made: the next wait starts short again. */
    public void reset() {
        spins = spinsAfterReset;
        parkingSince = 0;
        parkNs = FIRST_PARK_NS;
    }

    /** The next park, in nanoseconds (for tests). */
    long nextParkNs() {
        return parkNs;
    }
}
