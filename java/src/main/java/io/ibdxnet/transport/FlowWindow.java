package io.ibdxnet.transport;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Sender side of flow control (paper §2.4) for one connection: at most
 * {@code window} bytes sent and not yet confirmed by the receiver. A frame
 * larger than the window goes alone (when nothing else is outstanding).
 */
public final class FlowWindow {
    private final long window;
    private final long unit;
    private final AtomicLong unconfirmed = new AtomicLong();
    /** Senders waiting for room, woken by confirmations. */
    private final WaitList waiters = new WaitList();

    /**
     * Set on a thread that runs handlers of received messages, for as long
     * as it does: told the node whose window this thread is about to wait
     * for. Receivers confirm bytes only once their handlers returned, so a
     * handler waiting for a peer's window while that peer's handlers wait
     * for ours would wait for each other; the hook lets the core confirm
     * what it holds of that peer first (see {@code IncomingPath}).
     */
    public static final ThreadLocal<java.util.function.IntConsumer> BEFORE_HANDLER_WAITS = new ThreadLocal<>();

    /** Where senders wait for room (for tests). */
    WaitList waiters() {
        return waiters;
    }

    /** {@code unit}: bytes one confirmation unit stands for. */
    public FlowWindow(long window, long unit) {
        this.window = window;
        this.unit = unit;
    }

    /** Something that says whether the connection is gone (then waiting is pointless). */
    @FunctionalInterface
    public interface Liveness {
        boolean isClosed();
    }

    /**
     * The largest frame (header included) a transport may send through a
     * ring of {@code ringSize} bytes and a window of {@code window} bytes
     * confirmed in units of {@code unit}: at most half the ring, and at most
     * the window less one unit. The receiver confirms whole units only, so up
     * to a unit less one byte can stay unconfirmed; a frame as large as the
     * whole window would then never fit and its sender would wait until its
     * timeout.
     */
    public static int largestFrame(long ringSize, long window, long unit) {
        long max = Math.min(ringSize / 2, window - unit);
        max &= -OutgoingRingBuffer.ALIGN; // whole records: an aligned frame still fits
        if (max < 64) {
            throw new IllegalArgumentException("flow control window " + window + " with confirmation unit " + unit
                    + " leaves no room for a frame (window - unit must be at least 64 bytes)");
        }
        return (int) Math.min(max, Integer.MAX_VALUE & -OutgoingRingBuffer.ALIGN);
    }

    /** Waits until {@code bytes} fit into the window, until {@code deadlineNanos}. */
    public void acquire(int bytes, long deadlineNanos, int node, Liveness connection) throws NetworkException {
        IdleStrategy backoff = null;
        while (true) {
            long seen = unconfirmed.get();
            if (seen + bytes <= window || seen <= 0) {
                // getAndAdd never retries under contention (a CAS loop did, visibly in JFR).
                long u = unconfirmed.getAndAdd(bytes);
                if (u + bytes <= window || u <= 0) {
                    return;
                }
                unconfirmed.addAndGet(-bytes);
            }
            if (connection.isClosed()) {
                throw new NetworkException(FailureReason.DISCONNECTED, "connection to node " + node + " closed");
            }
            if (System.nanoTime() - deadlineNanos > 0) {
                throw new NetworkException(FailureReason.TIMEOUT, "flow control window to node " + node + " stayed full");
            }
            java.util.function.IntConsumer hook = BEFORE_HANDLER_WAITS.get();
            if (hook != null) {
                hook.accept(node); // each turn: what was held meanwhile too
                if (fits(bytes)) {
                    continue;
                }
            }
            if (backoff == null) {
                backoff = IdleStrategy.waiter();
            }
            backoff.idle(waiters, () -> fits(bytes));
        }
    }

    /** {@link #acquire} without waiting: false (nothing taken) if {@code bytes} do not fit now. */
    public boolean tryAcquire(int bytes) {
        if (!fits(bytes)) {
            return false;
        }
        long u = unconfirmed.getAndAdd(bytes);
        if (u + bytes <= window || u <= 0) {
            return true;
        }
        release(bytes);
        return false;
    }

    /** Gives back {@code bytes} taken by {@link #acquire} that were not sent after all. */
    public void release(int bytes) {
        unconfirmed.addAndGet(-bytes);
        waiters.signal();
    }

    private boolean fits(int bytes) {
        long seen = unconfirmed.get();
        return seen + bytes <= window || seen <= 0;
    }

    /** The receiver confirmed {@code units} units. */
    public void confirm(int units) {
        unconfirmed.addAndGet(-units * unit);
        waiters.signal();
    }

    /**
     * The receiver's final confirmation: it handled {@code bytes} more than
     * its confirmed units. False (nothing changed) if that is more than was
     * sent and not confirmed — a peer cannot have handled what it never got.
     */
    public boolean confirmFinal(long bytes) {
        long u = unconfirmed.get();
        if (bytes < 0 || bytes > u) {
            return false;
        }
        unconfirmed.addAndGet(-bytes);
        waiters.signal();
        return true;
    }

    /** Bytes sent and not confirmed. */
    public long unconfirmed() {
        return unconfirmed.get();
    }
}
