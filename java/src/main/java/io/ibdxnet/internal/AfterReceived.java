package io.ibdxnet.internal;

import io.ibdxnet.core.IncomingBufferQueue;
import io.ibdxnet.core.RateLimitedLog;
import java.util.logging.Level;

/**
 * Actions that wait until their source's buffers received so far are parsed
 * ({@link IncomingPath#afterReceived}): a disconnect fails the requests to a
 * node only after the answers it sent before it went were read.
 */
final class AfterReceived {
    private final int nodeId;
    private final IncomingBufferQueue ibq;
    private final RateLimitedLog warnings;
    /** Actions waiting until their source's buffers received so far are parsed. */
    private final java.util.concurrent.ConcurrentLinkedQueue<AfterSource> afters = new java.util.concurrent.ConcurrentLinkedQueue<>();
    /** {@link #afters} is not empty (read by the coordinator before it waits for a buffer). */
    private volatile boolean aftersWaiting;

    /** An action for when nothing of {@code source} waits in the queue or is being parsed. */
    private static final class AfterSource {
        final int source;
        final Runnable action;

        AfterSource(int source, Runnable action) {
            this.source = source;
            this.action = action;
        }
    }

    AfterReceived(int nodeId, IncomingBufferQueue ibq, RateLimitedLog warnings) {
        this.nodeId = nodeId;
        this.ibq = ibq;
        this.warnings = warnings;
    }

    void add(int source, Runnable action) {
        afters.add(new AfterSource(source, action));
        aftersWaiting = true; // before the tryLock: a coordinator that holds the role sees it when it loops
    }

    /** Some action waits (the coordinator then looks every millisecond). */
    boolean waiting() {
        return aftersWaiting;
    }

    /** Role holder only: runs the actions whose source has nothing left to parse. */
    void run() {
        if (!aftersWaiting) {
            return;
        }
        for (java.util.Iterator<AfterSource> it = afters.iterator(); it.hasNext();) {
            AfterSource a = it.next();
            if (ibq.idle(a.source)) {
                it.remove();
                try {
                    a.action.run();
                } catch (RuntimeException e) {
                    warnings.caused(Level.WARNING, "after received", a.source, "node " + nodeId
                            + ": an action after the buffers of node " + a.source + " failed", e);
                }
            }
        }
        aftersWaiting = !afters.isEmpty();
    }
}
