package io.ibdxnet.transport;

import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * How a thread waits (for ring space, a flow control window, a receiver
 * that refused): spin briefly, then park for a time that doubles from
 * {@link #FIRST_PARK_NS} up to {@link #MAX_PARK_NS} — on a {@link WaitList}
 * where the change is signalled, so the park ends with the change. A long
 * wait then costs about a thousand wake-ups per second instead of fifty
 * thousand, which matters when dozens of senders wait at once on two cores;
 * where nobody signals, it may end up to {@link #MAX_PARK_NS} late. One
 * instance per wait, used by one thread.
 */
public final class Backoff {
    static final int SPINS = 100;
    /** The first park: as before this class, a short wait is not slowed down. */
    public static final long FIRST_PARK_NS = 20_000;
    /** The longest park: what a long wait may add after its cause went away. */
    public static final long MAX_PARK_NS = 1_000_000;

    private final int spinsAfterReset;
    private int spins;
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

    /** Waits a little: a spin, or a park longer than the last one. */
    public void pause() {
        if (spins < SPINS) {
            spins++;
            Thread.onSpinWait();
            return;
        }
        LockSupport.parkNanos(parkNs);
        parkNs = Math.min(MAX_PARK_NS, parkNs * 2);
    }

    /**
     * Waits a little for {@code ready}: a spin, or a park on {@code list}
     * (woken early by its {@link WaitList#signal}) longer than the last one.
     */
    public void pause(WaitList list, BooleanSupplier ready) {
        if (spins < SPINS) {
            spins++;
            Thread.onSpinWait();
            return;
        }
        list.park(parkNs, ready);
        parkNs = Math.min(MAX_PARK_NS, parkNs * 2);
    }

    /** True once spinning is over (the next {@link #pause} parks). */
    public boolean parking() {
        return spins >= SPINS;
    }

    /** Progress was made: the next wait starts short again. */
    public void reset() {
        spins = spinsAfterReset;
        parkNs = FIRST_PARK_NS;
    }

    /** The next park, in nanoseconds (for tests). */
    long nextParkNs() {
        return parkNs;
    }
}
