package io.ibdxnet.internal;

import io.ibdxnet.Message;
import io.ibdxnet.MessageHandler;
import io.ibdxnet.Request;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.NodeRefs;
import io.ibdxnet.transport.Transport;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Level;

/**
 * The receive path's batches of messages for the handler threads (one per
 * buffer), and the confirmation of their buffers: a buffer is confirmed to
 * its sender once its batch's handlers returned, or earlier
 * ({@link #confirmHeld}) when a handler is about to wait for that sender's
 * window.
 */
final class HandlerBatches {
    private static final java.util.concurrent.atomic.AtomicReferenceFieldUpdater<Batch, IncomingBuffer> CONFIRMS =
            java.util.concurrent.atomic.AtomicReferenceFieldUpdater.newUpdater(Batch.class, IncomingBuffer.class, "confirms");

    private final int nodeId;
    private final Transport transport;
    private final CoreCounters counters;
    private final RateLimitedLog warnings;
    private final ErrorReplier replier;
    /**
     * Per source, its batches whose buffers are not confirmed yet, oldest
     * first (confirmed ones leave from the head). Created by the role holder.
     */
    private final NodeRefs<java.util.concurrent.ConcurrentLinkedQueue<Batch>> held = new NodeRefs<>();
    /** Set on threads running batches: see {@link FlowWindow#BEFORE_HANDLER_WAITS}. */
    final java.util.function.IntConsumer confirmHeld = this::confirmHeld;

    HandlerBatches(int nodeId, Transport transport, CoreCounters counters, RateLimitedLog warnings, ErrorReplier replier) {
        this.nodeId = nodeId;
        this.transport = transport;
        this.counters = counters;
        this.warnings = warnings;
        this.replier = replier;
    }

    Batch newBatch() {
        return new Batch();
    }

    /** Role holder only: {@code full}'s handlers confirm {@code b} when they returned; held until then. */
    void hold(Batch full, IncomingBuffer b) {
        full.confirms = b;
        java.util.concurrent.ConcurrentLinkedQueue<Batch> q = held.get(b.source);
        if (q == null) {
            q = new java.util.concurrent.ConcurrentLinkedQueue<>();
            held.set(b.source, q);
        }
        q.add(full); // before it can run
    }

    /**
     * A handler on this thread is about to wait for {@code node}'s flow-control
     * window. That node's handlers may be waiting for ours, each side's window
     * full of messages the other has not handled: confirm everything held of
     * {@code node} now (its bytes count as delivered before their handlers
     * ran: a loss of them is no longer reported), so neither waits for the other.
     */
    private void confirmHeld(int node) {
        java.util.Queue<Batch> q = held.get(node);
        if (q == null) {
            return;
        }
        for (Batch b; (b = q.poll()) != null;) {
            IncomingBuffer c = b.takeConfirms();
            if (c != null) {
                counters.confirmedBeforeHandled.incrementAndGet();
                transport.consumed(c);
            }
        }
    }

    /** Messages parsed from one buffer, handed to a handler thread in one go. */
    final class Batch implements Runnable {
        final List<MessageHandler<Message>> receivers = new ArrayList<>();
        final List<Message> messages = new ArrayList<>();
        /** What the messages are accounted as in their source's handler share. */
        long bytes;
        /** The source node (set when it is handed to the handlers). */
        int source;
        /**
         * The buffer the messages completed in: its bytes are confirmed to
         * their sender once the handlers returned (null: nothing to confirm,
         * or confirmed already). Taken once ({@link #takeConfirms}): by this
         * batch's end, or early by {@link #confirmHeld}.
         */
        volatile IncomingBuffer confirms;

        IncomingBuffer takeConfirms() {
            IncomingBuffer c = confirms;
            return c != null && CONFIRMS.compareAndSet(this, c, null) ? c : null;
        }

        @Override
        public void run() {
            java.util.function.IntConsumer outer = FlowWindow.BEFORE_HANDLER_WAITS.get();
            FlowWindow.BEFORE_HANDLER_WAITS.set(confirmHeld);
            try {
                handleAll();
            } finally {
                FlowWindow.BEFORE_HANDLER_WAITS.set(outer);
                IncomingBuffer c = takeConfirms();
                if (c != null) {
                    transport.consumed(c); // handled: only now may the sender count the bytes as delivered
                }
                java.util.Queue<Batch> q = held.get(source);
                Batch h;
                while (q != null && (h = q.peek()) != null && h.confirms == null) {
                    q.remove(h); // confirmed: no longer held
                }
            }
        }

        private void handleAll() {
            for (int i = 0; i < messages.size(); i++) {
                Message m = messages.get(i);
                try {
                    receivers.get(i).handle(m);
                } catch (Throwable e) { // a handler's failure must not end the handler thread
                    counters.handlerErrors.incrementAndGet();
                    warnings.log(Level.SEVERE, "receiver failed", m.getSource(), "node " + nodeId + ": receiver of "
                            + m.getType() + "/" + m.getSubtype() + " failed on a message of node " + m.getSource(), e);
                    if (m instanceof Request) {
                        replier.answerWithError((Request<?>) m, e);
                    }
                }
            }
        }
    }
}
