package io.ibdxnet.internal;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.transport.IdleStrategy;
import io.ibdxnet.transport.NodeId;
import io.ibdxnet.transport.NodeRefs;
import io.ibdxnet.transport.WaitList;
import java.util.ArrayDeque;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Async sends that could not go out without waiting, in a lane per
 * destination, sent in the order they were deferred by a small shared pool
 * ({@value #THREADS} daemon threads {@code dxnet-deferred-<node>-<i>}, gone
 * after a second idle); a lane is sent by one pool thread at a time.
 *
 * <p>Order: once a send to node N is deferred, later async sends to N are
 * deferred behind it ({@link #clear} is false until the lane is empty), and a
 * synchronous send to N first waits for everything deferred to N before it
 * ({@link #awaitAhead}). A lane counts what was deferred ({@code queued},
 * written under the lane's lock together with the queue) and what is done
 * ({@code done}, written by the one thread sending the lane after the frames
 * were handed to the transport): {@code done == queued} means nothing is
 * ahead.
 */
public final class DeferredSends {
    static final int THREADS = 4;

    /** Sends one deferred message (waiting until its {@code sendBy}). */
    public interface Sender {
        void send(DeferredMessage d) throws Exception;
    }

    /** Learns how one deferred message ended: {@code failure} null if sent. */
    public interface Outcome {
        void ended(DeferredMessage d, Throwable failure);
    }

    private static final class Lane {
        final ArrayDeque<DeferredMessage> queue = new ArrayDeque<>(); // guarded by this
        long bytes; // of the queued messages' payloads still to send; guarded by this
        boolean draining; // guarded by this
        volatile long queued;
        volatile long done;
        final WaitList waiters = new WaitList();

        public boolean clear() {
            return done == queued; // done first: it never passes queued
        }
    }

    private final NodeRefs<Lane> lanes = new NodeRefs<>();
    private final long maxBytesPerNode;
    private final ThreadPoolExecutor pool;
    private final Sender sender;
    private final Outcome outcome;
    /** Deferred messages of handlers on a receiving thread not yet sent (or failed). */
    private final AtomicInteger fromReceivingThread = new AtomicInteger();

    /** {@code maxBytesPerNode}: see {@link #defer}. */
    public DeferredSends(int nodeId, long maxBytesPerNode, Sender sender, Outcome outcome) {
        this.maxBytesPerNode = maxBytesPerNode;
        this.sender = sender;
        this.outcome = outcome;
        AtomicInteger threads = new AtomicInteger();
        this.pool = new ThreadPoolExecutor(THREADS, THREADS, 1, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
            Thread t = new Thread(r, "dxnet-deferred-" + nodeId + "-" + threads.getAndIncrement());
            t.setDaemon(true);
            return t;
        });
        pool.allowCoreThreadTimeOut(true);
    }

    /** True if nothing deferred to {@code node} is still waiting: a send may go inline. */
    public boolean clear(int node) {
        Lane l = NodeId.isValid(node) ? lanes.get(node) : null;
        return l == null || l.clear();
    }

    /**
     * True while a send deferred by a handler on a transport's receiving
     * thread still waits: that thread then hands further batches to the
     * handler pool (whose sends may wait) rather than defer without bound.
     */
    public boolean receivingThreadSendsWaiting() {
        return fromReceivingThread.get() > 0;
    }

    /**
     * Queues {@code d} behind what was deferred to its node before; a pool
     * thread sends it. Refused with {@link FailureReason#OVERLOADED} when the
     * lane already holds payload and {@code d}'s would take it beyond
     * {@code maxBytesPerNode} — unless part of {@code d} was sent already
     * (the rest must follow, or the stream breaks) or a handler on a
     * receiving thread sent it (one batch's sends at most wait at a time:
     * see {@link #receivingThreadSendsWaiting}).
     */
    public void defer(DeferredMessage d) throws NetworkException {
        Lane l = lanes.get(d.dest);
        if (l == null) {
            lanes.compareAndSet(d.dest, null, new Lane());
            l = lanes.get(d.dest);
        }
        long size = d.payload.length - d.sentInline;
        boolean start;
        synchronized (l) {
            if (d.sentInline == 0 && !d.fromReceivingThread && l.bytes > 0 && l.bytes + size > maxBytesPerNode) {
                throw new NetworkException(FailureReason.OVERLOADED, "async request to node " + d.dest + " refused: "
                        + l.bytes + " bytes of " + l.queue.size() + " requests already wait to be sent to it "
                        + "(maxDeferredBytesPerNode = " + maxBytesPerNode + ")");
            }
            if (d.fromReceivingThread) {
                fromReceivingThread.incrementAndGet();
            }
            l.bytes += size;
            l.queue.add(d);
            l.queued++;
            start = !l.draining;
            l.draining = true;
        }
        if (start) {
            Lane lane = l;
            try {
                pool.execute(() -> drain(lane));
            } catch (RejectedExecutionException closed) {
                drain(lane); // shut down: every send fails at once (the node is closed)
            }
        }
    }

    /**
     * Waits until what was deferred to {@code node} before this call went out
     * (or failed), until {@code deadlineNanos}: a synchronous send keeps its
     * place behind the async ones of the same thread.
     */
    public void awaitAhead(int node, long deadlineNanos) throws NetworkException {
        Lane l = NodeId.isValid(node) ? lanes.get(node) : null;
        if (l == null || l.clear()) {
            return;
        }
        long target = l.queued;
        IdleStrategy backoff = IdleStrategy.waiter();
        while (l.done - target < 0) {
            if (System.nanoTime() - deadlineNanos > 0) {
                throw new NetworkException(FailureReason.TIMEOUT, "send to node " + node + " timed out behind " + (target - l.done)
                        + " async sends deferred before it");
            }
            backoff.idle(l.waiters, () -> l.done - target >= 0);
        }
    }

    /** Pool thread: sends the lane's messages in order until it is empty. */
    private void drain(Lane l) {
        while (true) {
            DeferredMessage d;
            synchronized (l) {
                d = l.queue.peek();
                if (d == null) {
                    l.draining = false;
                    return;
                }
            }
            Throwable failure = null;
            try {
                sender.send(d);
            } catch (Exception | Error e) {
                failure = e;
            }
            synchronized (l) {
                l.queue.poll();
                l.bytes -= d.payload.length - d.sentInline;
            }
            l.done++; // only the draining thread writes it
            l.waiters.signal();
            if (d.fromReceivingThread) {
                fromReceivingThread.decrementAndGet();
            }
            try {
                outcome.ended(d, failure);
            } catch (RuntimeException ignored) {
                // a future's dependent threw: not ours to handle
            }
        }
    }

    /** Stops the pool; what is still queued is sent (and fails) on the threads that have it. */
    public void shutdown() {
        pool.shutdown();
    }
}
