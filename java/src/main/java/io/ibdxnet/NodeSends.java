package io.ibdxnet;

import io.ibdxnet.core.Frame;
import io.ibdxnet.core.HandlerDispatch;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.internal.CoreCounters;
import io.ibdxnet.internal.DeferredMessage;
import io.ibdxnet.internal.DeferredSends;
import io.ibdxnet.internal.DropNotice;
import io.ibdxnet.internal.ErrorResponse;
import io.ibdxnet.internal.IncomingPath;
import io.ibdxnet.internal.MessageSender;
import io.ibdxnet.internal.PendingRequests;
import io.ibdxnet.internal.ResponseTypes;
import io.ibdxnet.internal.ResponseWait;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.BooleanSupplier;
import java.util.logging.Level;

/**
 * How a node's messages, replies and requests leave it: inline, or deferred
 * behind earlier sends to their node (async requests, sends of handlers on
 * the receiving thread, drop notices), and what becomes of a deferred one.
 * The bodies of {@code DXNet}'s send methods, whose javadoc says what they promise.
 */
final class NodeSends {
    private final DXNetConfig config;
    private final CoreCounters counters;
    private final RateLimitedLog warnings;
    private final PendingRequests requests;
    private final MessageSender sender;
    private final DeferredSends deferred;
    private final IncomingPath incoming;
    private final LossReports losses;
    private final ResponseWait responses;
    /** False once the node is closing: nothing more is sent. */
    private final BooleanSupplier running;

    NodeSends(DXNetConfig config, CoreCounters counters, RateLimitedLog warnings, PendingRequests requests,
            MessageSender sender, DeferredSends deferred, IncomingPath incoming, LossReports losses,
            ResponseWait responses, BooleanSupplier running) {
        this.config = config;
        this.counters = counters;
        this.warnings = warnings;
        this.requests = requests;
        this.sender = sender;
        this.deferred = deferred;
        this.incoming = incoming;
        this.losses = losses;
        this.responses = responses;
        this.running = running;
    }

    /** {@code DXNet.sendMessage}. */
    void sendMessage(Message message) throws NetworkException {
        sendPlain(message);
    }

    /**
     * A message or a reply: at once if nothing is deferred ahead of it and it
     * needs no wait ({@link MessageSender#sendNow}: no clock read), else the
     * waiting path with its deadline, from then: the send timeout bounds the
     * wait, which starts there.
     */
    private void sendPlain(Message m) throws NetworkException {
        if (running.getAsBoolean() && !HandlerDispatch.onReceivingThread() && deferred.clear(m.getDestination())
                && sender.sendNow(m)) {
            return;
        }
        send(m, 0, 0, sender.sendDeadline());
    }

    /** {@code DXNet.reply}. */
    <R extends Response> boolean reply(Request<R> request, R response) {
        response.answer(request);
        try {
            sendPlain(response);
            return true;
        } catch (NetworkException e) {
            if (e.reason() == FailureReason.TOO_LARGE) {
                invalidReply(request, e);
                return false;
            }
            counters.repliesFailed.incrementAndGet();
            warnings.warn("reply not sent", request.getSource(), "node " + config.nodeId + ": the reply to request "
                    + request.requestId + " of node " + request.getSource() + " was not sent: " + e.getMessage());
        } catch (RuntimeException e) {
            invalidReply(request, e);
        }
        return false;
    }

    /** A reply our handler got wrong: counted, logged, and the requester answered with the error. */
    private void invalidReply(Request<?> request, RuntimeException e) {
        counters.repliesFailed.incrementAndGet();
        // Our handler's fault, but once per request of that node: limited, the trace on the line that passes.
        warnings.log(Level.WARNING, "invalid reply", request.getSource(), "node " + config.nodeId + ": the reply to request "
                + request.requestId + " of node " + request.getSource() + " is invalid", e);
        answerWithError(request, e);
    }

    /** {@code DXNet.sendSync(Request, int)}. */
    <R extends Response> R sendSync(Request<R> request, int timeoutMs) throws NetworkException {
        if (timeoutMs <= 0) {
            throw new IllegalArgumentException("request timeout must be positive: " + timeoutMs);
        }
        if (HandlerDispatch.onReceivingThread()) {
            // Its response would arrive through this very thread: it would wait for itself.
            throw new IllegalStateException("sendSync from a message handler running on the transport's receiving "
                    + "thread (handleOnReceivingThread = true) would wait for itself: its response arrives through this "
                    + "thread; use sendAsync, or handleOnReceivingThread = false");
        }
        long now = System.nanoTime();
        PendingRequests.Pending p = requests.open(request.getDestination(), timeoutMs, ResponseTypes.expected(request));
        request.requestId = p.requestId;
        try {
            send(request, Frame.REQUEST, p.requestId, sender.sendDeadline(now, p.deadline));
        } catch (RuntimeException e) {
            requests.cancel(p);
            throw e;
        }
        CompletableFuture<Response> f = p.future;
        responses.await(f, !HandlerDispatch.onHandlerThread());
        try {
            @SuppressWarnings("unchecked") // the receive path completes it only with an instance of p.expected, R's class
            R r = (R) f.get();
            return r;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new NetworkException(FailureReason.INTERRUPTED, "interrupted while waiting for a response", e);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause; // a NetworkException with its reason, or a bug of ours as it is
            }
            if (cause instanceof Error) {
                throw (Error) cause;
            }
            throw new NetworkException(FailureReason.BAD_RESPONSE, cause.toString(), cause);
        }
    }

    /** {@code DXNet.sendAsync(Request, int)}. */
    @SuppressWarnings("unchecked")
    <R extends Response> CompletableFuture<R> sendAsync(Request<R> request, int timeoutMs) {
        if (timeoutMs <= 0) {
            throw new IllegalArgumentException("request timeout must be positive: " + timeoutMs);
        }
        long now = System.nanoTime();
        PendingRequests.Pending p = requests.open(request.getDestination(), timeoutMs, ResponseTypes.expected(request));
        request.requestId = p.requestId;
        try {
            if (!running.getAsBoolean()) {
                throw new NetworkException(FailureReason.CLOSED, "DXNet is closed");
            }
            DeferredMessage d = deferred.clear(request.getDestination())
                    ? sender.trySend(request, Frame.REQUEST, p.requestId)
                    : sender.serialise(request, Frame.REQUEST, p.requestId);
            if (d != null) {
                d.request = p;
                d.sendBy = sender.sendDeadline(now, p.deadline);
                deferred.defer(d);
            }
        } catch (IllegalArgumentException e) {
            requests.cancel(p);
            throw e;
        } catch (RuntimeException e) {
            requests.cancel(p);
            p.future.completeExceptionally(e);
        }
        // Safe: the receive path completes it only with an instance of p.expected, R's class.
        return (CompletableFuture<R>) (CompletableFuture<?>) p.future;
    }

    /**
     * A synchronous send: behind what was deferred to the node before it
     * (order per thread), then inline; waits until {@code sendBy} at most.
     */
    private void send(Message m, int kindFlags, int requestId, long sendBy) throws NetworkException {
        if (!running.getAsBoolean()) {
            throw new NetworkException(FailureReason.CLOSED, "DXNet is closed");
        }
        if (HandlerDispatch.onReceivingThread()) {
            sendFromReceivingThread(m, kindFlags, requestId, sendBy);
            return;
        }
        deferred.awaitAhead(m.getDestination(), sendBy);
        sender.send(m, kindFlags, requestId, sendBy);
    }

    /**
     * A send of a handler running on the transport's receiving thread: it must
     * not wait for ring or window room (they come back through this thread),
     * so what cannot go out at once is deferred like an async send (in order,
     * behind what was deferred to the node before); a deferred send that
     * fails later is logged (a reply also counted in {@code replies_failed}).
     */
    private void sendFromReceivingThread(Message m, int kindFlags, int requestId, long sendBy) throws NetworkException {
        DeferredMessage d = deferred.clear(m.getDestination()) ? sender.trySend(m, kindFlags, requestId)
                : sender.serialise(m, kindFlags, requestId);
        if (d != null) {
            d.sendBy = sendBy;
            d.fromReceivingThread = true;
            counters.receivingThreadSendsDeferred.incrementAndGet();
            deferred.defer(d);
        }
    }

    /** Pool thread: one deferred request, unless nobody waits for it any more. */
    void sendDeferred(DeferredMessage d) throws NetworkException {
        if (d.sentInline == 0 && d.request != null && d.request.future.isDone()) {
            return; // timed out (or failed) while queued: not sent at all
        }
        if (!running.getAsBoolean()) {
            throw new NetworkException(FailureReason.CLOSED, "DXNet is closed");
        }
        if (d.sentInline == 0 && System.nanoTime() - d.sendBy > 0) {
            throw new NetworkException(FailureReason.TIMEOUT, (d.request != null ? "request" : "message") + " to node "
                    + d.dest + " not sent within its deadline (it waited behind earlier sends to that node)");
        }
        // A handler may wait behind this send (its reply queued after it): the
        // wait breaks the same cycle as a handler's own (HandlerBatches.confirmHeld).
        java.util.function.IntConsumer outer = io.ibdxnet.transport.FlowWindow.BEFORE_HANDLER_WAITS.get();
        io.ibdxnet.transport.FlowWindow.BEFORE_HANDLER_WAITS.set(incoming.beforeWindowWait());
        try {
            sender.sendDeferred(d);
        } finally {
            io.ibdxnet.transport.FlowWindow.BEFORE_HANDLER_WAITS.set(outer);
        }
    }

    /** Pool thread: a deferred request that could not be sent fails through its future. */
    void deferredEnded(DeferredMessage d, Throwable failure) {
        if (d.dropNotice) {
            if (failure == null) {
                counters.dropNoticesSent.incrementAndGet();
            } else {
                warnings.warn("drop notice not sent", d.dest, "node " + config.nodeId + ": could not tell node " + d.dest
                        + " that messages it sent were dropped here: " + failure.getMessage());
            }
        } else if (failure != null && d.request != null) {
            requests.cancel(d.request);
            d.request.future.completeExceptionally(failure); // a NetworkException with its reason, or a bug as it is
        } else if (failure != null) { // deferred by a handler on the receiving thread: nobody else learns of it
            if (d.isResponse()) {
                counters.repliesFailed.incrementAndGet();
            }
            warnings.warn("deferred send failed", d.dest, "node " + config.nodeId + ": a "
                    + (d.isResponse() ? "reply" : "message") + " to node " + d.dest + " sent by a handler on the "
                    + "receiving thread (deferred) was not sent: " + failure.getMessage());
        }
    }

    /** The requester learns that our handler failed (instead of waiting out its timeout). */
    void answerWithError(Request<?> r, Throwable e) {
        try {
            send(new ErrorResponse(r, e), 0, 0, sender.sendDeadline());
        } catch (RuntimeException x) {
            warnings.caused(Level.WARNING, "error reply not sent", r.getSource(), "node " + config.nodeId
                    + ": could not tell node " + r.getSource() + " that its request " + r.requestId + " failed", x);
        }
    }

    /**
     * Tells {@code source} that {@code messages} plain messages of it
     * ({@code bytes} of payload) were dropped here ({@link io.ibdxnet.internal.DropNotices}; the
     * receive path or the timer thread): queued for the deferred-send pool,
     * never waited for. The own node hears it at once.
     */
    void tellDropped(int source, long messages, long bytes, String causes) {
        if (!running.getAsBoolean()) {
            return;
        }
        if (source == config.nodeId) {
            losses.dropReported(source, messages, bytes, causes);
            return;
        }
        try {
            DeferredMessage d = sender.serialise(new DropNotice(source, messages, bytes, causes), 0, 0);
            d.sendBy = sender.sendDeadline();
            d.dropNotice = true;
            deferred.defer(d);
        } catch (RuntimeException e) {
            warnings.caused(Level.WARNING, "drop notice not sent", source, "node " + config.nodeId + ": could not tell node "
                    + source + " that messages it sent were dropped here", e);
        }
    }
}
