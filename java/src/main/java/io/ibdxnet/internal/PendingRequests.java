package io.ibdxnet.internal;

import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.RequestTimeoutException;
import io.ibdxnet.Response;
import io.ibdxnet.core.RateLimitedLog;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Requests waiting for their response, by request id. Each leaves at its
 * response, at a failure of its target, or at its deadline (a sweep every
 * 10 ms while any is pending), so a caller that stops waiting leaves nothing
 * behind.
 */
public final class PendingRequests {
    /** A request in flight: who must answer it, and until when. */
    public static final class Pending {
        public final CompletableFuture<Response> future = new CompletableFuture<>();
        public final int target;
        public final int requestId;
        public final int timeoutMs;
        public final long deadline;
        /** The response class the request declared ({@link ResponseTypes}). */
        public final Class<?> expected;

        public Pending(int target, int requestId, int timeoutMs, Class<?> expected) {
            this.target = target;
            this.requestId = requestId;
            this.timeoutMs = timeoutMs;
            this.expected = expected;
            this.deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        }
    }

    private final int nodeId;
    private final CoreCounters counters;
    private final RateLimitedLog warnings;
    private final Map<Integer, Pending> pending = new ConcurrentHashMap<>();
    /**
     * Starts at a random id (never 0), not at 1: a restarted node must not
     * issue the ids its previous process was still owed answers for, or a
     * peer's late answer to the old process completes the new process's
     * request of the same id (StaleResponseAfterRestartTest). With n answers
     * owed and m new requests the chance of a match is about n·m / 2^31
     * (ids are taken modulo 2^31: always positive).
     */
    private final AtomicInteger nextRequestId = new AtomicInteger(firstRequestId());
    private final ScheduledExecutorService timeouts;
    /** A sweep is scheduled (or running). */
    private final java.util.concurrent.atomic.AtomicBoolean sweeping = new java.util.concurrent.atomic.AtomicBoolean();
    private volatile boolean started;
    private final java.util.List<Runnable> closeHooks = new java.util.concurrent.CopyOnWriteArrayList<>();

    public PendingRequests(int nodeId, CoreCounters counters, RateLimitedLog warnings) {
        this.nodeId = nodeId;
        this.counters = counters;
        this.warnings = warnings;
        this.timeouts = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "dxnet-timeouts-" + nodeId);
            t.setDaemon(true);
            return t;
        });
    }

    /**
     * Lets requests start the sweep: only once the node is up, so a failed
     * start leaves no thread. Fails one made-up request first, so that the
     * first real timeout does not pay for loading and linking that path: it
     * came 8-17 ms late on this host, and up to 1.3 s in the emulated VMs
     * (bench/results/2026-11-28-cluster-first-timeout.txt).
     */
    public void start() {
        new Pending(0, 0, 1, Object.class).future.completeExceptionally(timedOut(new Pending(0, 0, 1, Object.class)));
        started = true;
    }

    /** A random first request id in [1, 2^31). */
    static int firstRequestId() {
        return java.util.concurrent.ThreadLocalRandom.current().nextInt(1, Integer.MAX_VALUE);
    }

    /** A new pending request to {@code target} with a fresh id (never 0: a {@link DropNotice} answers no request). */
    public Pending open(int target, int timeoutMs, Class<?> expected) {
        int id = nextRequestId.getAndIncrement() & Integer.MAX_VALUE; // positive, as logs and exceptions show it
        if (id == 0) { // wrapped around
            id = nextRequestId.getAndIncrement() & Integer.MAX_VALUE;
        }
        Pending p = new Pending(target, id, timeoutMs, expected);
        pending.put(p.requestId, p);
        sweepWhilePending();
        return p;
    }

    /**
     * Sweeps every 10 ms while requests are pending, and not at all while
     * none are (an idle node does not wake up 100 times a second for nothing).
     */
    private void sweepWhilePending() {
        if (started && !pending.isEmpty() && sweeping.compareAndSet(false, true)) {
            try {
                timeouts.schedule(this::sweep, 10, TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.RejectedExecutionException closed) {
                sweeping.set(false); // closing: close() fails what is left
            }
        }
    }

    /** Timeout thread: one sweep, then the next one if requests are still pending. */
    private void sweep() {
        expire();
        sweeping.set(false);
        // A request opened while this ran saw `sweeping` still true: look again.
        sweepWhilePending();
    }

    /** Forgets {@code p} (its request was never sent). */
    public void cancel(Pending p) {
        pending.remove(p.requestId, p);
    }

    /** The request {@code requestId} if it is pending and went to {@code source}; it stays pending. */
    Pending peek(int source, int requestId) {
        Pending p = pending.get(requestId);
        return p != null && p.target == source ? p : null;
    }

    /**
     * The pending request {@code requestId}, taken out, if {@code source} may
     * answer it: only the node the request went to may (counted otherwise).
     * Null also for a late answer after the timeout (counted as dropped).
     */
    Pending answerable(int source, int requestId) {
        Pending p = pending.get(requestId);
        if (p != null && p.target != source) {
            counters.responsesRefused.incrementAndGet();
            warnings.warn("response from another node", source, "node " + nodeId + ": response to request " + requestId + " from node " + source
                    + ", which the request did not go to (node " + p.target + "), refused");
            return null;
        }
        if (p == null || !pending.remove(requestId, p)) {
            counters.dropped.incrementAndGet(); // late response after a timeout
            return null;
        }
        return p;
    }

    /** Fails every request to {@code node} with a {@link NetworkException} saying {@code reason}. */
    public void failTo(int node, String reason) {
        fail(pendingTo(node), reason);
    }

    /** The requests to {@code node} pending now (to fail just these later: a request sent meanwhile may reach its successor). */
    public java.util.List<Pending> pendingTo(int node) {
        java.util.List<Pending> to = new java.util.ArrayList<>();
        for (Pending p : pending.values()) {
            if (p.target == node) {
                to.add(p);
            }
        }
        return to;
    }

    /** Fails those of {@code which} still pending, saying {@code reason}. */
    public void fail(java.util.List<Pending> which, String reason) {
        for (Pending p : which) {
            if (pending.remove(p.requestId, p)) {
                p.future.completeExceptionally(new NetworkException(FailureReason.DISCONNECTED, reason));
            }
        }
    }

    /** Runs {@code r} in {@code delayMs} on the timeout thread (not at all once closed). */
    public void later(long delayMs, Runnable r) {
        try {
            timeouts.schedule(r, delayMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // closed: close() failed every request already
        }
    }

    public int size() {
        return pending.size();
    }

    /** Runs {@code r} when {@link #close} runs (what sends requests stops with them). */
    public void onClose(Runnable r) {
        closeHooks.add(r);
    }

    /** Stops the sweep and fails what is left. */
    public void close() {
        timeouts.shutdownNow();
        for (Runnable r : closeHooks) {
            r.run();
        }
        for (Pending p : pending.values()) {
            p.future.completeExceptionally(new NetworkException(FailureReason.CLOSED, "DXNet closed"));
        }
        pending.clear();
    }

    /** Timeout thread: fails the requests whose deadline passed. */
    private void expire() {
        long now = System.nanoTime();
        for (Pending p : pending.values()) {
            if (now - p.deadline >= 0 && pending.remove(p.requestId, p)) {
                p.future.completeExceptionally(timedOut(p));
            }
        }
    }

    private static RequestTimeoutException timedOut(Pending p) {
        return new RequestTimeoutException("no response to request " + p.requestId + " from node " + p.target
                + " within " + p.timeoutMs + " ms");
    }
}
