package io.ibdxnet;

import static org.junit.Assert.assertFalse;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Sender fan-out for tests: {@code threads} threads, each calling a step with
 * its id and a sequence number, either a fixed number of times ({@link #run})
 * or until stopped ({@link #start}). The first unexpected throwable of any
 * sender fails the test when the senders are joined; a step may end its own
 * thread early by throwing {@link Done} (a node closed under it, as a test
 * expected).
 */
public final class Senders implements AutoCloseable {
    /** One send of sender {@code id}, its {@code seq}-th. */
    @FunctionalInterface
    public interface Step {
        void send(int id, int seq) throws Exception;
    }

    /** Thrown by a step: this sender is done, without a failure. */
    public static final class Done extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public Done() {
            super(null, null, false, false);
        }
    }

    private final List<Thread> threads = new ArrayList<>();
    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private final AtomicLong sent = new AtomicLong();

    private Senders(String name, int count, int perThread, Step step) {
        for (int t = 0; t < count; t++) {
            final int id = t;
            Thread th = new Thread(() -> {
                try {
                    for (int s = 0; s < perThread && !stop.get(); s++) {
                        step.send(id, s);
                        sent.incrementAndGet();
                    }
                } catch (Done done) {
                    // this sender's end, as the test expects
                } catch (Throwable e) {
                    failure.compareAndSet(null, new AssertionError("sender " + id + " failed", e));
                }
            }, name + "-" + t);
            th.setDaemon(true);
            threads.add(th);
        }
        threads.forEach(Thread::start);
    }

    /** Runs {@code perThread} steps on each of {@code count} threads and joins them; rethrows the first failure. */
    public static void run(int count, int perThread, Step step) throws Exception {
        try (Senders s = new Senders("sender", count, perThread, step)) {
            s.join(Long.MAX_VALUE);
        }
    }

    /** Starts {@code count} threads named {@code name-<id>} calling {@code step} until {@link #stop}. */
    public static Senders start(String name, int count, Step step) {
        return new Senders(name, count, Integer.MAX_VALUE, step);
    }

    /** Steps that returned, over all senders. */
    public long sent() {
        return sent.get();
    }

    /** The first failure so far, or null. */
    public Throwable failure() {
        return failure.get();
    }

    /** Asks every sender to end after its current step. */
    public void stop() {
        stop.set(true);
    }

    /**
     * Waits up to {@code timeoutMs} for every sender to end (a failed test
     * when one still runs), then rethrows the first failure.
     */
    public void join(long timeoutMs) throws InterruptedException {
        long end = timeoutMs == Long.MAX_VALUE ? Long.MAX_VALUE : System.nanoTime() + timeoutMs * 1_000_000L;
        for (Thread th : threads) {
            long left = end == Long.MAX_VALUE ? 0 : Math.max(1, (end - System.nanoTime()) / 1_000_000L);
            th.join(left);
            assertFalse(th.getName() + " still runs after " + timeoutMs + " ms:\n" + TestSupport.threadDump(), th.isAlive());
        }
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
    }

    /** Stops the senders and waits for them (a minute at most); failures are not rethrown here. */
    @Override
    public void close() {
        stop();
        try {
            for (Thread th : threads) {
                th.join(60_000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
