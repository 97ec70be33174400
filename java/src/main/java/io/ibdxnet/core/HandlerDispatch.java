package io.ibdxnet.core;

import io.ibdxnet.transport.NodeId;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Runs message handler tasks on a pool of threads.
 *
 * <p>Ordered (the default): each source node has a serial lane; its tasks run
 * one at a time in submission order, and a lane with work is scheduled onto
 * the pool like an actor. Lanes of different sources run on different threads
 * at once, so a slow handler holds up only its own source's later tasks (and
 * one thread). A lane gives its thread back after {@link #BURST} tasks, so
 * one busy source cannot starve the others when sources outnumber threads.
 *
 * <p>Unordered: every task goes to the pool on its own; tasks of one source
 * may run concurrently and finish in any order.
 *
 * <p>Either way at most {@code capacity} tasks wait (not yet started); a
 * submit beyond blocks until one starts (backpressure toward the network).
 */
public final class HandlerDispatch {
    private static final Logger LOG = Logger.getLogger(HandlerDispatch.class.getName());
    /** Tasks a lane runs before it lets the pool run another lane (fairness when sources outnumber threads). */
    static final int BURST = 64;

    private final ThreadPoolExecutor pool;
    private final Semaphore room;
    private final int capacity;
    private final boolean ordered;
    private final AtomicReferenceArray<Lane> lanes = new AtomicReferenceArray<>(NodeId.COUNT);
    private volatile boolean closed;
    /** Tasks submitted and not yet finished. */
    private final java.util.concurrent.atomic.AtomicLong unfinished = new java.util.concurrent.atomic.AtomicLong();

    /**
     * {@code threads} handler threads named {@code name + index} (daemons);
     * {@code capacity} waiting tasks at most; {@code ordered}: serial per source.
     */
    public HandlerDispatch(String name, int threads, int capacity, boolean ordered) {
        AtomicInteger index = new AtomicInteger();
        // Unbounded: the semaphore bounds the waiting tasks, and a lane's own
        // rescheduling must never block or be refused while running.
        this.pool = new ThreadPoolExecutor(threads, threads, 0, TimeUnit.MILLISECONDS, new YieldingQueue(), r -> {
            Thread t = new Thread(r, name + index.getAndIncrement());
            t.setDaemon(true);
            return t;
        }, new ThreadPoolExecutor.DiscardPolicy()); // refused only after shutdown
        this.room = new Semaphore(capacity);
        this.capacity = capacity;
        this.ordered = ordered;
    }

    /**
     * Queues {@code task} of source node {@code source} ({@link NodeId}), waiting
     * while {@code capacity} tasks wait. False if this dispatch was shut down
     * meanwhile (the task is dropped).
     */
    public boolean submit(int source, Runnable task) throws InterruptedException {
        while (!room.tryAcquire(100, TimeUnit.MILLISECONDS)) {
            if (closed) {
                return false;
            }
        }
        queue(source, task);
        return true;
    }

    /**
     * Takes the room for one task now, without waiting: false if there is none
     * (or this dispatch is shut down). Pair it with {@link #submitReserved} or
     * {@link #unreserve}.
     */
    public boolean tryReserve() {
        return !closed && room.tryAcquire();
    }

    /** Gives back the room {@link #tryReserve} took. */
    public void unreserve() {
        room.release();
    }

    /**
     * Queues {@code task} into the room {@link #tryReserve} took; never blocks.
     * False if this dispatch was shut down meanwhile (the task is dropped).
     */
    public boolean submitReserved(int source, Runnable task) {
        if (closed) {
            room.release();
            return false;
        }
        queue(source, task);
        return true;
    }

    private void queue(int source, Runnable task) {
        unfinished.incrementAndGet();
        if (!ordered) {
            pool.execute(() -> {
                room.release();
                runGuarded(task);
            });
            return;
        }
        Lane lane = lanes.get(source);
        if (lane == null) {
            Lane fresh = new Lane();
            lane = lanes.compareAndExchange(source, null, fresh);
            if (lane == null) {
                lane = fresh;
            }
        }
        lane.add(task);
    }

    /** Tasks waiting to start (at most {@code capacity}). */
    public int queued() {
        return capacity - room.availablePermits();
    }

    /**
     * Stops taking tasks: those already in the pool's queue still run, a lane
     * that would need the pool again is dropped; the threads end afterwards.
     */
    public void shutdown() {
        closed = true;
        pool.shutdown();
    }

    private void runGuarded(Runnable task) {
        try {
            task.run();
        } catch (Throwable e) { // tasks catch their handlers' failures; this is a bug, but the thread lives on
            LOG.log(Level.SEVERE, "a message handler task failed", e);
        } finally {
            unfinished.decrementAndGet();
        }
    }

    /**
     * Waits until every submitted task has run, at most {@code timeoutMs};
     * true if they all did (call it after the last submit).
     */
    public boolean awaitIdle(long timeoutMs) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (unfinished.get() > 0) {
            if (System.nanoTime() - end > 0) {
                return false;
            }
            Thread.sleep(1);
        }
        return true;
    }

    /** The pool's queue: an idle handler thread yields for a moment before it blocks ({@link IdleYield}). */
    private static final class YieldingQueue extends LinkedBlockingQueue<Runnable> {
        private static final long serialVersionUID = 1L;
        /** Made once: a method reference per take would allocate per batch. */
        private final transient java.util.function.Supplier<Runnable> pollNow = this::poll;

        @Override
        public Runnable take() throws InterruptedException {
            Runnable r = IdleYield.poll(pollNow);
            return r != null ? r : super.take();
        }
    }

    /** One source's tasks: runs on at most one pool thread at a time. */
    private final class Lane implements Runnable {
        private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
        /** True from the moment the lane is handed to the pool until it returns with nothing to do. */
        private final AtomicBoolean scheduled = new AtomicBoolean();

        void add(Runnable task) {
            tasks.add(task);
            if (scheduled.compareAndSet(false, true)) {
                pool.execute(this);
            }
        }

        @Override
        public void run() {
            for (int i = 0; i < BURST; i++) {
                Runnable task = tasks.poll();
                if (task == null) {
                    break;
                }
                room.release();
                runGuarded(task);
            }
            scheduled.set(false);
            // A task added after the last poll saw scheduled still true: take it up.
            if (!tasks.isEmpty() && scheduled.compareAndSet(false, true)) {
                pool.execute(this);
            }
        }
    }
}
