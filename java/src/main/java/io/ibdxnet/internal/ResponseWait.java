package io.ibdxnet.internal;

import io.ibdxnet.transport.IdleStrategy;
import io.ibdxnet.transport.Transport;
import java.util.concurrent.Future;

/**
 * How a thread waits for its response ({@code sendSync}). Where the transport
 * lets it (ib: engine key {@code recv_from_caller}), the thread polls the
 * transport's receive side itself for a while: its response then reaches it
 * without waking the receive thread and then this one, two hand-offs on
 * shared cores (issue 31). Handlers of what it receives meanwhile still run
 * where they would (the pool, or the transport's own receiving thread):
 * never on this thread ({@link #polling}). After {@link #POLL_NANOS}, or
 * where it cannot poll, it idles as every waiter does ({@link IdleStrategy}).
 */
public final class ResponseWait {
    /**
     * How long a waiter polls before it hands the receive side back and idles:
     * the engine's receive thread polls as long before it sleeps
     * ({@code parking_sleep_after_us}).
     */
    static final long POLL_NANOS = 1_000_000;
    /** Set while this thread polls a receive side for its response. */
    private static final ThreadLocal<boolean[]> POLLING = ThreadLocal.withInitial(() -> new boolean[1]);

    private final Transport transport;

    public ResponseWait(Transport transport) {
        this.transport = transport;
    }

    /** True while this thread polls the receive side as a waiting caller (run no handler here). */
    public static boolean polling() {
        return POLLING.get()[0];
    }

    /**
     * Returns once {@code f} is done. {@code mayPoll}: false on threads that
     * must not take the receive side (a handler thread: what it received
     * would be handled behind the handler that waits).
     */
    public void await(Future<?> f, boolean mayPoll) {
        if (f.isDone()) {
            return;
        }
        boolean[] here = POLLING.get();
        // Not nested: a completion stage run by this thread's poll that waits
        // again would find the receive side held by its own outer frame.
        if (mayPoll && !here[0] && transport.beginReceivingOnCaller()) {
            here[0] = true;
            try {
                poll(f);
            } finally {
                try {
                    transport.endReceivingOnCaller(); // may receive once more: still no handlers here
                } finally {
                    here[0] = false;
                }
            }
        }
        IdleStrategy.until(f::isDone); // a parked requester costs its response a wake-up
    }

    private void poll(Future<?> f) {
        long until = System.nanoTime() + POLL_NANOS;
        while (!f.isDone()) {
            int work = transport.receiveOnCaller();
            if (work > 0) {
                continue;
            }
            if (work < -1 || System.nanoTime() - until > 0) {
                return; // closed, or polled long enough
            }
            // As the engine's threads idle: spinning instead halved the median
            // here but starved the other threads (p99 up 2-20x, bench/README).
            Thread.yield();
        }
    }
}
