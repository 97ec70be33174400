package io.ibdxnet.core;

import io.ibdxnet.transport.IdleStrategy;
import io.ibdxnet.transport.NodeRefs;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntConsumer;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Runs message handler tasks on a pool of threads, each source node within
 * its own share.
 *
 * <p>Ordered (the default): each source node has a serial lane; its tasks run
 * one at a time in submission order, and a lane with work is scheduled onto
 * the pool like an actor. Lanes of different sources run on different threads
 * at once, so a slow handler holds up only its own source's later tasks (and
 * one thread). A lane gives its thread back after {@link #BURST} tasks, or
 * after one task that ran longer than {@link #SLOW_TASK_NANOS}, so the pool
 * serves sources round-robin.
 *
 * <p>Unordered: every task goes to the pool on its own; tasks of one source
 * may run concurrently and finish in any order.
 *
 * <p>Shares: a task is accounted (count and bytes) from submit until it
 * finished. A source {@link #hasRoom has room} while its tasks hold less than
 * {@code sourceBytes} and fewer tasks than the same share of
 * {@code capacity} ({@code capacity × sourceBytes / maxBytes}, at least 1),
 * and the node's less than {@code capacity} tasks and {@code maxBytes}; a
 * source with no task at all always has room (its guaranteed minimum). Submitting never blocks: the receive path asks
 * {@link #hasRoom} before it turns a source's buffer into tasks, and a source
 * without room stops being read ({@link #want}) until one of its own tasks
 * finishes — backpressure on that source only.
 */
public final class HandlerDispatch {
    private static final Logger LOG = Logger.getLogger(HandlerDispatch.class.getName());
    /** Tasks a lane runs before it lets the pool run another lane (fairness when sources outnumber threads). */
    static final int BURST = 64;
    /** A task that ran longer sends its lane to the back of the pool's queue. */
    static final long SLOW_TASK_NANOS = 1_000_000;
    /** The dispatch a handler thread belongs to (see {@link #onHandlerThread}). */
    private static final ThreadLocal<HandlerDispatch> HANDLER_THREAD = new ThreadLocal<>();
    /** Set while a transport's receiving thread runs handlers itself ({@link #runHere}). */
    private static final ThreadLocal<boolean[]> RECEIVING_THREAD = ThreadLocal.withInitial(() -> new boolean[1]);

    private final ThreadPoolExecutor pool;
    private final int capacity;
    private final long maxBytes;
    private final long sourceBytes;
    private final int sourceTasks;
    private final boolean ordered;
    private final NodeRefs<Lane> lanes = new NodeRefs<>();
    private final AtomicInteger tasks = new AtomicInteger();
    private final AtomicLong bytes = new AtomicLong();
    private volatile IntConsumer roomListener = s -> {};
    private volatile boolean closed;

    /**
     * {@code threads} handler threads named {@code name + index} (daemons);
     * at most about {@code capacity} tasks and {@code maxBytes} for the node and
     * {@code sourceBytes} per source (see the class comment); {@code ordered}:
     * serial per source.
     */
    public HandlerDispatch(String name, int threads, int capacity, long maxBytes, long sourceBytes, boolean ordered) {
        AtomicInteger index = new AtomicInteger();
        // Unbounded: the shares bound the tasks, and a lane's own rescheduling
        // must never block or be refused while running.
        this.pool = new ThreadPoolExecutor(threads, threads, 0, TimeUnit.MILLISECONDS, new YieldingQueue(), r -> {
            Thread t = new Thread(() -> {
                HANDLER_THREAD.set(this);
                r.run();
            }, name + index.getAndIncrement());
            t.setDaemon(true);
            return t;
        }, new ThreadPoolExecutor.DiscardPolicy()); // refused only after shutdown
        this.capacity = capacity;
        this.maxBytes = maxBytes;
        this.sourceBytes = sourceBytes;
        this.sourceTasks = (int) Math.max(1, Math.min(capacity, (double) capacity * sourceBytes / maxBytes));
        this.ordered = ordered;
    }

    /** True on a handler thread of any dispatch (its sends wait less: they hold a handler). */
    public static boolean onHandlerThread() {
        return HANDLER_THREAD.get() != null;
    }

    /**
     * True while this thread, a transport's receiving thread, runs message
     * handlers itself ({@link #runHere}): it must not wait for anything that
     * arrives through itself (responses, flow-control confirmations).
     */
    public static boolean onReceivingThread() {
        return RECEIVING_THREAD.get()[0];
    }

    /** True on one of this dispatch's own threads: waiting for this dispatch to be idle would wait for itself. */
    public boolean isOwnThread() {
        return HANDLER_THREAD.get() == this;
    }

    /** Called (on a handler thread, or the caller of {@link #want}) when a wanting source has room again. */
    public void onRoom(IntConsumer listener) {
        this.roomListener = listener;
    }

    /**
     * Whether {@code source} may queue more now: its share is not used up and
     * the node's is not (or it has no task at all). False once shut down.
     */
    public boolean hasRoom(int source) {
        if (closed) {
            return false;
        }
        Lane l = lanes.get(source);
        if (l == null || l.tasks.get() == 0) {
            return true;
        }
        return l.bytes.get() < sourceBytes && l.tasks.get() < sourceTasks && bytes.get() < maxBytes && tasks.get() < capacity;
    }

    /**
     * {@code source} found no room ({@link #hasRoom} false) and stopped being
     * read: the room listener hears of it once it has room again (at the latest
     * when its last task finished). Call it after the source was held, so the
     * listener's resume cannot come before the hold.
     */
    public void want(int source) {
        Lane l = lane(source);
        l.wanted.set(true);
        notifyIfRoom(l); // a task may have finished meanwhile
    }

    private void notifyIfRoom(Lane l) {
        if (l.wanted.get() && hasRoom(l.source) && l.wanted.compareAndSet(true, false)) {
            roomListener.accept(l.source);
        }
    }

    /** Counts a task of {@code source} ({@code taskBytes}) as queued or running; null once shut down. */
    private Lane account(int source, long taskBytes) {
        if (closed) {
            return null;
        }
        Lane l = lane(source);
        l.tasks.incrementAndGet();
        l.bytes.addAndGet(taskBytes);
        tasks.incrementAndGet();
        bytes.addAndGet(taskBytes);
        return l;
    }

    /**
     * Queues {@code task} of source node {@code source} ({@link NodeId}),
     * accounted as {@code taskBytes}; never blocks (ask {@link #hasRoom}
     * first). False if this dispatch was shut down (the task is dropped).
     */
    public boolean submit(int source, Runnable task, long taskBytes) {
        Lane l = account(source, taskBytes);
        if (l == null) {
            return false;
        }
        Job job = new Job(task, taskBytes);
        if (!ordered) {
            pool.execute(() -> runGuarded(l, job));
            return true;
        }
        l.add(job);
        return true;
    }

    /**
     * True if {@code source} has no task queued or running: a task run by the
     * caller now comes after every earlier one of that source.
     */
    public boolean idle(int source) {
        Lane l = lanes.get(source);
        return l == null || l.tasks.get() == 0;
    }

    /**
     * Runs {@code task} of {@code source} on the calling thread (a transport's
     * receiving thread), accounted like a submitted task while it runs
     * ({@link #onReceivingThread} true meanwhile). For order, ask
     * {@link #idle} first and submit nothing of that source meanwhile. False
     * if this dispatch was shut down (the task is dropped).
     */
    public boolean runHere(int source, Runnable task, long taskBytes) {
        Lane l = account(source, taskBytes);
        if (l == null) {
            return false;
        }
        boolean[] here = RECEIVING_THREAD.get();
        boolean outer = here[0];
        here[0] = true;
        try {
            runGuarded(l, new Job(task, taskBytes));
        } finally {
            here[0] = outer;
        }
        return true;
    }

    /**
     * Waits until {@code source} has room, then queues {@code task} (for
     * callers that may block, e.g. a message to the own node). False if this
     * dispatch was shut down meanwhile.
     */
    public boolean submitWhenRoom(int source, Runnable task, long taskBytes) throws InterruptedException {
        while (!hasRoom(source)) {
            if (closed) {
                return false;
            }
            Thread.sleep(1);
        }
        return submit(source, task, taskBytes);
    }

    private Lane lane(int source) {
        Lane lane = lanes.get(source);
        if (lane == null) {
            Lane fresh = new Lane(source);
            lane = lanes.compareAndExchange(source, null, fresh);
            if (lane == null) {
                lane = fresh;
            }
        }
        return lane;
    }

    /** Tasks submitted and not yet finished (at most about {@code capacity}). */
    public int queued() {
        return tasks.get();
    }

    /** Bytes of the tasks submitted and not yet finished. */
    public long queuedBytes() {
        return bytes.get();
    }

    /** Bytes of {@code source}'s tasks submitted and not yet finished. */
    public long queuedBytes(int source) {
        Lane l = lanes.get(source);
        return l == null ? 0 : l.bytes.get();
    }

    /**
     * Stops taking tasks: those already in the pool's queue still run, a lane
     * that would need the pool again is dropped; the threads end afterwards.
     */
    public void shutdown() {
        closed = true;
        pool.shutdown();
    }

    private void runGuarded(Lane l, Job job) {
        try {
            job.task.run();
        } catch (Throwable e) { // tasks catch their handlers' failures; this is a bug, but the thread lives on
            LOG.log(Level.SEVERE, "a message handler task failed", e);
        } finally {
            l.bytes.addAndGet(-job.bytes);
            l.tasks.decrementAndGet();
            bytes.addAndGet(-job.bytes);
            tasks.decrementAndGet();
            notifyIfRoom(l);
        }
    }

    /**
     * Waits until every submitted task has run, at most {@code timeoutMs};
     * true if they all did (call it after the last submit).
     */
    public boolean awaitIdle(long timeoutMs) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (tasks.get() > 0) {
            if (System.nanoTime() - end > 0) {
                return false;
            }
            Thread.sleep(1);
        }
        return true;
    }

    /** A task and the bytes it is accounted as. */
    private static final class Job {
        final Runnable task;
        final long bytes;

        Job(Runnable task, long bytes) {
            this.task = task;
            this.bytes = bytes;
        }
    }

    /** The pool's queue: an idle handler thread yields for a moment before it blocks ({@link IdleStrategy#beforeBlocking}). */
    private static final class YieldingQueue extends LinkedBlockingQueue<Runnable> {
        private static final long serialVersionUID = 1L;
        /** Made once: a method reference per take would allocate per batch. */
        private final transient java.util.function.Supplier<Runnable> pollNow = this::poll;

        @Override
        public Runnable take() throws InterruptedException {
            Runnable r = IdleStrategy.poll(pollNow);
            return r != null ? r : super.take();
        }
    }

    /** One source's tasks and share: runs on at most one pool thread at a time (ordered). */
    private final class Lane implements Runnable {
        final int source;
        final AtomicInteger tasks = new AtomicInteger();
        final AtomicLong bytes = new AtomicLong();
        /** The source stopped being read for want of room here ({@link #want}). */
        final AtomicBoolean wanted = new AtomicBoolean();
        private final ConcurrentLinkedQueue<Job> jobs = new ConcurrentLinkedQueue<>();
        /** True from the moment the lane is handed to the pool until it returns with nothing to do. */
        private final AtomicBoolean scheduled = new AtomicBoolean();

        Lane(int source) {
            this.source = source;
        }

        void add(Job job) {
            jobs.add(job);
            if (scheduled.compareAndSet(false, true)) {
                pool.execute(this);
            }
        }

        @Override
        public void run() {
            for (int i = 0; i < BURST; i++) {
                Job job = jobs.poll();
                if (job == null) {
                    break;
                }
                long start = System.nanoTime();
                runGuarded(this, job);
                if (System.nanoTime() - start > SLOW_TASK_NANOS) {
                    break; // a slow source goes to the back: the others are served in between
                }
            }
            scheduled.set(false);
            // A job added after the last poll saw scheduled still true: take it up.
            if (!jobs.isEmpty() && scheduled.compareAndSet(false, true)) {
                pool.execute(this);
            }
        }
    }
}
