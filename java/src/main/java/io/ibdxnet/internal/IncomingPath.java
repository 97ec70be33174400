package io.ibdxnet.internal;

import io.ibdxnet.DXNetConfig;
import io.ibdxnet.Message;
import io.ibdxnet.MessageHandler;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.NoReceiverException;
import io.ibdxnet.RemoteHandlerException;
import io.ibdxnet.Request;
import io.ibdxnet.Response;
import io.ibdxnet.core.Frame;
import io.ibdxnet.core.HandlerDispatch;
import io.ibdxnet.core.IncomingBufferQueue;
import io.ibdxnet.core.ProtocolViolation;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.core.ReceiveLimits;
import io.ibdxnet.core.StreamAssembler;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.NodeRefs;
import io.ibdxnet.transport.Transport;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The receive path: the message creation coordinator ("dxnet-mcc-N") takes
 * received buffers from the incoming buffer queue, assembles each
 * connection's stream into messages, completes requests with their
 * responses, and hands the other messages to the handler threads, one batch
 * per buffer. Whatever a peer's bytes do, only its connection suffers.
 */
public final class IncomingPath implements MessageSender.LocalDelivery {
    private static final ApiAccess API = ApiAccess.get();

    private static final Logger LOG = Logger.getLogger("io.ibdxnet.DXNet");
    /** What a queued message is accounted as beyond its payload (its objects). */
    static final int MESSAGE_OVERHEAD = 64;

    /** How a failed request handler is answered (through the send path). */
    public interface ErrorReplier {
        void answerWithError(Request<?> request, Throwable e);
    }

    /** Where the drops of plain messages go, and the notices of peers that dropped ours. */
    public interface Losses {
        /**
         * A plain message (no request, no response) of {@code source} with
         * {@code bytes} of payload was dropped here for {@code cause}, which
         * names its type: its source is to be told ({@link DropNotices}).
         */
        void dropped(int source, String cause, long bytes);

        /** {@code source} dropped {@code messages} of ours ({@code bytes} of payload) for {@code causes} ({@link DropNotice}). */
        void reported(int source, long messages, long bytes, String causes);
    }

    private final DXNetConfig config;
    private final Transport transport;
    private final IncomingBufferQueue ibq;
    private final HandlerDispatch handlers;
    private final MessageTypes types;
    private final PendingRequests requests;
    private final CoreCounters counters;
    private final RateLimitedLog warnings;
    private final ReceiveLimits limits;
    private final ErrorReplier replier;
    private final Losses losses;
    /** Sends deferred by handlers that ran on a receiving thread are still waiting: hand the next batches to the pool. */
    private final java.util.function.BooleanSupplier receivingThreadSendsWaiting;
    private final Thread coordinator;
    private final NodeRefs<StreamAssembler> assemblers = new NodeRefs<>();
    /**
     * Per source, its batches whose buffers are not confirmed yet, oldest
     * first (confirmed ones leave from the head). Created by the role holder.
     */
    private final NodeRefs<java.util.concurrent.ConcurrentLinkedQueue<Batch>> held = new NodeRefs<>();
    private static final java.util.concurrent.atomic.AtomicReferenceFieldUpdater<Batch, IncomingBuffer> CONFIRMS =
            java.util.concurrent.atomic.AtomicReferenceFieldUpdater.newUpdater(Batch.class, IncomingBuffer.class, "confirms");
    /** Set on threads running batches: see {@link FlowWindow#BEFORE_HANDLER_WAITS}. */
    private final java.util.function.IntConsumer confirmHeld = this::confirmHeld;
    /**
     * Held by whoever turns buffers into messages: the coordinator, or a
     * transport's receiving thread inline (see {@link #offer}). It guards the
     * assemblers, the batch and the importer.
     */
    private final ReentrantLock role = new ReentrantLock();
    private final AtomicLong inlineBuffers = new AtomicLong();
    private final AtomicLong handledOnReceivingThread = new AtomicLong();
    /** Role holder only: the batch being filled from the current buffer. */
    private Batch batch = new Batch();
    /** Role holder only: one importer for every received message (valid during importPayload). */
    private final MessageImporter importer = API.newImporter(null, 0, 0);
    private final StreamAssembler.Sink sink = this::received;
    /**
     * Role holder only: the sources whose stream stopped at a claim the node
     * budget cannot grant yet, in the order they began to wait; their lanes
     * are held until the limits move.
     */
    private final java.util.LinkedHashSet<Integer> waitingForBudget = new java.util.LinkedHashSet<>();
    /** Some stream waits for the node budget (read by the coordinator before it takes the lock). */
    private volatile boolean budgetWaiting;
    /** Role holder only: the limits' version when the first of them began to wait. */
    private long budgetSeen;
    private static final int DONE = 0;
    private static final int WAITS = 1;
    private static final int CLOSED = 2;
    /** Actions waiting until their source's buffers received so far are parsed ({@link #afterReceived}). */
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

    /** Bytes were consumed whose messages never reached a handler (stopped or closed meanwhile). */
    private volatile boolean consumedNotHandled;
    private volatile boolean running = true;
    /**
     * Set by {@link #start}: until then nothing received is parsed (buffers
     * wait in the queue, neither the coordinator nor a receiving thread
     * inline turns them into messages), so receivers registered before it
     * see every message.
     */
    private volatile boolean receiving;

    public IncomingPath(DXNetConfig config, Transport transport, IncomingBufferQueue ibq, HandlerDispatch handlers,
            MessageTypes types, PendingRequests requests, CoreCounters counters, RateLimitedLog warnings,
            ErrorReplier replier, Losses losses, java.util.function.BooleanSupplier receivingThreadSendsWaiting,
            Thread.UncaughtExceptionHandler onDeath) {
        this.config = config;
        this.transport = transport;
        this.ibq = ibq;
        this.handlers = handlers;
        this.types = types;
        this.requests = requests;
        this.counters = counters;
        this.warnings = warnings;
        this.limits = new ReceiveLimits(config.maxMessageSize, config.maxUnfinishedBytesPerConnection, config.maxUnfinishedBytes);
        this.replier = replier;
        this.losses = losses;
        this.receivingThreadSendsWaiting = receivingThreadSendsWaiting;
        this.coordinator = new Thread(this::coordinate, "dxnet-mcc-" + config.nodeId);
        this.coordinator.setDaemon(true);
        this.coordinator.setUncaughtExceptionHandler(onDeath);
        handlers.onRoom(ibq::resume);
    }

    /** Starts parsing: the coordinator, and receiving threads inline (see {@link #receiving}). */
    public void start() {
        receiving = true;
        coordinator.start();
    }

    /** Whether {@link #start} ran. */
    public boolean receiving() {
        return receiving;
    }

    public boolean alive() {
        return coordinator.isAlive();
    }

    /** Bytes claimed by unfinished messages (bounded by the receive limits). */
    public long unfinishedBytesClaimed() {
        return limits.claimed();
    }

    /**
     * Stops the coordinator and inline receiving (waiting up to {@code joinMs}
     * each). True if both ended and every message taken from a buffer
     * reached a handler.
     */
    public boolean stop(long joinMs) {
        running = false;
        coordinator.interrupt();
        boolean inlineDone = false;
        try {
            coordinator.join(joinMs);
            // A transport thread may be handling a buffer inline: wait it out. It
            // checks `running` under the lock, so none starts after this; what
            // it consumed has reached the handlers before close counts what
            // they handled (the peers are told that count).
            if (role.tryLock(joinMs, TimeUnit.MILLISECONDS)) {
                role.unlock();
                inlineDone = true;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return !coordinator.isAlive() && inlineDone && !consumedNotHandled;
    }

    /** Messages parsed from one buffer, handed to a handler thread in one go. */
    private final class Batch implements Runnable {
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
                    warnings.log(Level.SEVERE, "receiver failed", m.getSource(), "node " + config.nodeId + ": receiver of "
                            + m.getType() + "/" + m.getSubtype() + " failed on a message of node " + m.getSource(), e);
                    if (m instanceof Request) {
                        replier.answerWithError((Request<?>) m, e);
                    }
                }
            }
        }
    }

    /**
     * A transport hands over a received buffer (its receiving thread:
     * the native receive thread, the selector, a loopback pump). When nothing
     * waits for the coordinator and it is free, that thread turns the buffer
     * into messages itself: a round trip then crosses one thread hand-off less
     * on each side. Otherwise (or if no handler room is free right now) the
     * buffer goes to the queue. Never blocks (but see below); false if the
     * queue is full.
     *
     * <p>With {@code handleOnReceivingThread}, that thread also runs the
     * buffer's handlers itself (under the lock: nothing else of any source is
     * turned into messages meanwhile) when none of the source's tasks is
     * queued or running in the pool (order) and no send deferred by such a
     * handler still waits (else the pool handles them, whose sends may wait:
     * backpressure). The call then lasts as long as the handlers.
     */
    public boolean offer(IncomingBuffer b) {
        int src = b.source;
        if (config.receiveInline && receiving && running && ibq.idle(src) && handlers.hasRoom(src) && role.tryLock()) {
            try {
                // Each source's buffers come from one thread, and none of this
                // source's waits in the queue: this one is next in its stream.
                if (running && ibq.idle(src) && handlers.hasRoom(src)) {
                    inlineBuffers.incrementAndGet();
                    boolean here = config.handleOnReceivingThread && handlers.idle(src)
                            && !receivingThreadSendsWaiting.getAsBoolean();
                    if (handle(b, here) == WAITS) {
                        ibq.offerHeld(b); // the rest waits for the node budget, first in its lane
                        waitForBudget(src);
                    }
                    runAfters();
                    return true;
                }
            } catch (Throwable e) { // the transport's thread must live on; what the buffer held is lost
                counters.streamErrors.incrementAndGet();
                warnings.log(Level.SEVERE, "receiving failed", src, "node " + config.nodeId + ": receiving a buffer of node "
                        + src + " failed", e);
                return true;
            } finally {
                role.unlock();
            }
        }
        return ibq.offer(b);
    }

    /**
     * Runs {@code action} once every buffer of {@code source} received so
     * far was turned into messages (at once if none waits): a disconnect
     * fails the requests to a node only after the answers it sent before it
     * went were read. Never blocks (DXNet calls it on the request timeout
     * thread, which must not wait behind a parse): if the coordinator is
     * parsing, it runs the action when that source's buffers are through. A source whose buffers keep coming, or wait for the
     * budget, holds its action back; its requests' own deadlines still apply.
     */
    public void afterReceived(int source, Runnable action) {
        afters.add(new AfterSource(source, action));
        aftersWaiting = true; // before the tryLock: a coordinator that holds the role sees it when it loops
        if (role.tryLock()) {
            try {
                runAfters();
            } finally {
                role.unlock();
            }
        }
    }

    /** Role holder only: runs the actions whose source has nothing left to parse. */
    private void runAfters() {
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
                    warnings.caused(Level.WARNING, "after received", a.source, "node " + config.nodeId
                            + ": an action after the buffers of node " + a.source + " failed", e);
                }
            }
        }
        aftersWaiting = !afters.isEmpty();
    }

    /** Buffers turned into messages by the transport's own thread (see {@link #offer}). */
    public long inlineBuffers() {
        return inlineBuffers.get();
    }

    /** Batches whose handlers ran on the transport's own thread ({@code handleOnReceivingThread}). */
    public long handledOnReceivingThread() {
        return handledOnReceivingThread.get();
    }

    /**
     * The message creation coordinator: queued buffers → messages, round-robin
     * across sources, in order per source. A source whose handler share is
     * used up is held (its buffers stay queued, unconfirmed, so its sender is
     * held back by flow control) until one of its tasks finishes.
     */
    private void coordinate() {
        while (running) {
            IncomingBuffer b;
            try {
                // While a stream waits for the node budget, look at the limits every
                // millisecond (budget also comes back on a transport's thread, inline).
                b = ibq.poll(budgetWaiting || aftersWaiting ? 1 : 1_000); // stop() interrupts the wait
            } catch (InterruptedException e) {
                return;
            }
            role.lock();
            try {
                resumeBudgetWaiters();
                runAfters();
                if (b == null) {
                    continue;
                }
                if (!handlers.hasRoom(b.source)) {
                    ibq.giveBack(b);
                    handlers.want(b.source); // after the hold: the resume cannot come first
                    continue;
                }
                int result;
                try {
                    result = handle(b, false);
                } catch (RuntimeException | Error e) {
                    ibq.finished(b);
                    throw e;
                }
                if (result == WAITS) {
                    ibq.giveBack(b); // held, its parsed bytes counted: fed again once the budget moved
                    waitForBudget(b.source);
                    continue;
                }
                ibq.finished(b);
                runAfters();
                if (result == CLOSED) {
                    return;
                }
            } finally {
                role.unlock();
            }
        }
    }

    /** Role holder only: {@code source}'s stream stopped at a claim the node budget cannot grant yet. */
    private void waitForBudget(int source) {
        if (waitingForBudget.isEmpty()) {
            budgetSeen = limits.version();
        }
        waitingForBudget.add(source);
        if (!budgetWaiting) {
            budgetWaiting = true;
            ibq.wake(); // a coordinator in a long wait (this may run inline) looks at the limits from now on
        }
    }

    /**
     * Role holder only: once the limits moved (budget came back, or a waiting
     * connection left their queue), every stream that waits is fed again, in
     * the order they began to wait (the limits grant first come, first served).
     */
    private void resumeBudgetWaiters() {
        if (waitingForBudget.isEmpty() || limits.version() == budgetSeen) {
            return;
        }
        for (int source : waitingForBudget) {
            ibq.resume(source);
        }
        waitingForBudget.clear();
        budgetWaiting = false;
    }

    /**
     * One buffer into messages, one batch of them to the handlers (one
     * hand-off per buffer, not per message: waking a handler thread was the
     * top hotspot with small messages). Role holder only, after
     * {@link HandlerDispatch#hasRoom} for its source; {@code here}: the
     * handlers run on this thread now instead ({@link HandlerDispatch#runHere}).
     * {@link #DONE}; or
     * {@link #WAITS}: its stream stopped at a claim the node budget cannot
     * grant yet (the buffer is kept, unconfirmed, {@link IncomingBuffer#parsed}
     * bytes in); or {@link #CLOSED}: the handlers were shut down and messages
     * taken from the buffer never reach one.
     */
    private int handle(IncomingBuffer b, boolean here) {
        boolean fed = true;
        boolean threw = true;
        boolean resumed = b.parsed > 0; // batches of its first part may still wait for their handlers
        try {
            fed = parse(b, sink);
            threw = false;
        } finally {
            if (fed) {
                b.release();
                if (threw) {
                    transport.consumed(b);
                }
            }
        }
        boolean confirmLater = fed && resumed && !handlers.idle(b.source);
        if (batch.messages.isEmpty() && !confirmLater) {
            if (fed) {
                // No message completed here for a handler (a part of a large one,
                // responses, drops): confirmed at once, so a message larger than
                // the window never waits for its own rest.
                transport.consumed(b);
            }
            return fed ? DONE : WAITS;
        }
        // Confirmed when the batch's handlers returned (Batch.run). A buffer fed
        // again after a budget wait whose first part's batch may not have run
        // yet confirms behind it (an empty batch, in order on the source's lane).
        Batch full = batch;
        batch = new Batch();
        full.source = b.source;
        if (fed) {
            full.confirms = b;
            java.util.concurrent.ConcurrentLinkedQueue<Batch> q = held.get(b.source);
            if (q == null) {
                q = new java.util.concurrent.ConcurrentLinkedQueue<>();
                held.set(b.source, q);
            }
            q.add(full); // before it can run
        }
        if (here) {
            handledOnReceivingThread.incrementAndGet();
        }
        if (!(here ? handlers.runHere(b.source, full, full.bytes) : handlers.submit(b.source, full, full.bytes))) {
            consumedNotHandled = true;
            return CLOSED;
        }
        return fed ? DONE : WAITS;
    }

    /**
     * What a thread whose wait a handler may depend on (a deferred send) sets
     * as {@link FlowWindow#BEFORE_HANDLER_WAITS} while it sends.
     */
    public java.util.function.IntConsumer beforeWindowWait() {
        return confirmHeld;
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

    /**
     * One buffer into the stream of its connection. Whatever its bytes do,
     * only that connection suffers: a violation (or any other failure while
     * parsing) closes it, its unfinished messages are dropped and the rest of
     * its bytes skipped; every other stream and this thread go on. False if
     * the stream waits for the node budget in this buffer (its
     * {@link IncomingBuffer#parsed} bytes are in; none confirmed yet).
     */
    private boolean parse(IncomingBuffer b, StreamAssembler.Sink sink) {
        StreamAssembler a = assemblers.get(b.source);
        if (a == null || a.connection() != b.connection) {
            if (a != null) {
                counters.partialsDropped.addAndGet(a.discard()); // its connection ended: a new stream starts
            }
            a = new StreamAssembler(b.source, b.connection, limits);
            assemblers.set(b.source, a);
        }
        if (a.broken()) {
            counters.bytesDropped.addAndGet(b.length);
            return true;
        }
        String reason;
        try {
            int from = b.parsed; // more than 0 when its stream waited for the node budget in this buffer
            b.parsed = from + a.feed(b.address + from, b.length - from, sink);
            return !a.waiting();
        } catch (ProtocolViolation e) {
            counters.violations.incrementAndGet();
            reason = "protocol violation: " + e.getMessage();
        } catch (Throwable e) {
            counters.streamErrors.incrementAndGet();
            reason = "receiving failed: " + e;
            warnings.log(Level.SEVERE, "stream failed", b.source, "node " + config.nodeId + ": the stream of node " + b.source
                    + " failed", e);
        }
        counters.bytesDropped.addAndGet(b.length - b.parsed);
        fail(a, reason);
        return true;
    }

    /** Closes the connection of a stream that broke; drops its unfinished messages. */
    private void fail(StreamAssembler a, String reason) {
        int source = a.source();
        counters.partialsDropped.addAndGet(a.discard());
        warnings.warn("closing connection", source, "node " + config.nodeId + ": closing the connection from node "
                + source + ": " + reason);
        try {
            transport.closeConnection(source, a.connection(), reason);
        } catch (RuntimeException e) {
            warnings.caused(Level.WARNING, "close failed", source, "node " + config.nodeId + ": closing the connection from node "
                    + source + " failed", e);
        }
        requests.failTo(source, "node " + source + " disconnected: " + reason);
    }

    /** Role holder only: a message the assembler found in the current buffer. */
    private void received(int src, byte type, byte sub, int flags, int req, byte[] array, long at, int length) {
        if (array != null) {
            counters.receivedCopied.incrementAndGet(); // assembled in a heap array, not imported where it lay
        }
        deliver(src, type, sub, flags, req, API.reset(importer, array, at, length), batch);
    }

    /** A message to the own node, as its own handler task. */
    @Override
    public void deliver(int source, byte type, byte subtype, int flags, int requestId, byte[] payload) {
        deliver(source, type, subtype, flags, requestId, API.newImporter(payload, payload.length), null);
    }

    /** Creates the message and queues it for its receiver: into {@code into}, or as its own task. */
    private void deliver(int source, byte type, byte subtype, int flags, int requestId, MessageImporter payload, Batch into) {
        int size = payload.remaining();
        if ((flags & Frame.ERROR) != 0) {
            failRequest(source, requestId, payload);
            return;
        }
        Constructor<? extends Message> ctor = types.constructor(type, subtype);
        if (ctor == null && (flags & Frame.RESPONSE) != 0) {
            ctor = learnResponseType(source, requestId, type, subtype);
            if (ctor == null) {
                return; // its request failed at once (or nobody waits for it any more)
            }
        }
        if (ctor == null) {
            counters.dropped.incrementAndGet();
            // A receiver without its class is the usual slip with the untyped register: say so.
            String hint = types.handler(type, subtype) != null
                    ? " (a receiver is registered for it, but no class: registerMessageType(" + type + ", " + subtype
                            + ", <class>) or the typed register(Class, handler))"
                    : "";
            warnings.warn("unregistered type", source, "node " + config.nodeId + ": message of unregistered type " + type + "/"
                    + subtype + " from " + source + " dropped" + hint);
            if ((flags & Frame.REQUEST) != 0) {
                refuse(new RefusedRequest(source, type, subtype, requestId), "type " + type + "/" + subtype
                        + " is not registered at node " + config.nodeId, size, into);
            } else {
                losses.dropped(source, hint.isEmpty() ? "type " + type + "/" + subtype + " not registered"
                        : "a receiver but no class registered for type " + type + "/" + subtype, size);
            }
            return;
        }
        Message m;
        try {
            m = ctor.newInstance();
            API.setSource(m, source);
            m.setDestination(config.nodeId);
            API.importPayload(m, payload);
        } catch (Throwable e) { // a lying payload (or a failing import) drops this message only
            counters.dropped.incrementAndGet();
            warnings.caused(Level.WARNING, "cannot create message", source, "node " + config.nodeId + ": cannot create message "
                    + type + "/" + subtype + " from " + source, e);
            if ((flags & Frame.REQUEST) != 0) {
                // Its requester learns it at once (a RemoteHandlerException naming the cause), not at its timeout.
                RuntimeException why = new IllegalArgumentException("cannot create request " + type + "/" + subtype
                        + " at node " + config.nodeId + " from its payload: " + e, null);
                queue(source, r -> replier.answerWithError((Request<?>) r, why),
                        new RefusedRequest(source, type, subtype, requestId), size, into);
            } else if ((flags & Frame.RESPONSE) == 0) {
                losses.dropped(source, "cannot create a message of type " + type + "/" + subtype + " from its payload ("
                        + e.getClass().getSimpleName() + ")", size);
            }
            return;
        }
        if ((flags & Frame.RESPONSE) != 0 && m instanceof Response) {
            API.setRequestId((Response) m, requestId);
            complete(source, requestId, (Response) m);
            return;
        }
        if (m instanceof Request) {
            API.setRequestId((Request<?>) m, requestId);
        }
        MessageHandler<Message> r = types.handler(type, subtype);
        if (r == null) {
            counters.dropped.incrementAndGet();
            warnings.warn("no receiver", source, "node " + config.nodeId + ": no receiver for " + type + "/" + subtype
                    + " (from node " + source + ")");
            if (m instanceof Request) {
                refuse((Request<?>) m, "no receiver for type " + type + "/" + subtype + " at node " + config.nodeId, size,
                        into);
            } else if ((flags & (Frame.REQUEST | Frame.RESPONSE)) == 0) {
                losses.dropped(source, "no receiver for type " + type + "/" + subtype, size);
            }
            return;
        }
        queue(source, r, m, size, into);
    }

    /**
     * Answers {@code request}, which nobody here handles, with a
     * {@link NoReceiverException} at once (its requester would otherwise wait
     * for its timeout) — from a handler task in its source's share, like a
     * reply: the coordinator never waits for a send.
     */
    private void refuse(Request<?> request, String why, int size, Batch into) {
        queue(request.getSource(), m -> replier.answerWithError((Request<?>) m, new NoReceiver(why)), request, size, into);
    }

    /** Queues {@code m} for {@code r}: into {@code into}, or as its own task. */
    private void queue(int source, MessageHandler<Message> r, Message m, int size, Batch into) {
        Batch b = into != null ? into : new Batch();
        b.receivers.add(r);
        b.messages.add(m);
        b.bytes += size + MESSAGE_OVERHEAD;
        if (into == null) {
            try {
                if (!handlers.submitWhenRoom(source, b, b.bytes)) {
                    counters.dropped.incrementAndGet(); // closed meanwhile
                    consumedNotHandled = true;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                counters.dropped.incrementAndGet();
                consumedNotHandled = true;
            }
        }
    }

    /**
     * An error response: the remote handler of request {@code requestId}
     * threw; or, with request id 0, a {@link DropNotice}.
     */
    private void failRequest(int source, int requestId, MessageImporter payload) {
        String cls;
        String msg;
        long messages = 0;
        long bytes = 0;
        boolean notice;
        try {
            cls = payload.readString();
            msg = payload.readString();
            notice = requestId == 0 && DropNotice.MARKER.equals(cls);
            if (notice) {
                messages = payload.readLong();
                bytes = payload.readLong();
            }
        } catch (RuntimeException e) {
            counters.dropped.incrementAndGet();
            return;
        }
        if (notice) {
            losses.reported(source, messages, bytes, msg.length() <= DropNotice.MAX_CAUSES_CHARS ? msg
                    : msg.substring(0, DropNotice.MAX_CAUSES_CHARS) + "…");
            return;
        }
        PendingRequests.Pending p = requests.answerable(source, requestId);
        if (p != null) {
            p.future.completeExceptionally(NO_RECEIVER.equals(cls) ? new NoReceiverException(source, msg)
                    : new RemoteHandlerException(source, cls, msg.isEmpty() ? null : msg));
        }
    }

    /** What {@link #refuse} sends as the remote exception: read back as a {@link NoReceiverException}. */
    static final class NoReceiver extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NoReceiver(String why) {
            super(why, null, false, false);
        }
    }

    /** Its class name, which the error response carries. */
    static final String NO_RECEIVER = NoReceiver.class.getName();

    /**
     * A response of a type not registered here: the class its request
     * declared ({@code Request<R>}) is registered for it when that is the
     * class of this type, so nobody has to register response classes by hand.
     * Otherwise its request fails at once, naming the type (null returned).
     */
    private Constructor<? extends Message> learnResponseType(int source, int requestId, byte type, byte subtype) {
        PendingRequests.Pending p = requests.peek(source, requestId);
        if (p == null) {
            counters.dropped.incrementAndGet(); // late, or never asked for
            return null;
        }
        String problem;
        if (p.expected != Response.class && Response.class.isAssignableFrom(p.expected)) {
            @SuppressWarnings("unchecked")
            Class<? extends Message> r = (Class<? extends Message>) p.expected;
            try {
                Message probe = MessageTypes.probe(r);
                if (probe.getType() == type && probe.getSubtype() == subtype) {
                    types.define(type, subtype, r);
                    return types.constructor(type, subtype);
                }
                problem = "is not the type " + probe.getType() + "/" + probe.getSubtype() + " of " + r.getName()
                        + ", the response class the request declares";
            } catch (IllegalArgumentException e) {
                problem = "cannot be read: " + e.getMessage();
            }
        } else {
            problem = "is not registered here and the request does not declare its response class";
        }
        counters.dropped.incrementAndGet();
        p = requests.answerable(source, requestId);
        if (p != null) {
            p.future.completeExceptionally(new NetworkException(FailureReason.BAD_RESPONSE, "node " + source + " answered request " + requestId
                    + " with a response of type " + type + "/" + subtype + ", which " + problem));
        }
        return null;
    }

    /** A response: completes its request if it is of the class the request declared. */
    private void complete(int source, int requestId, Response m) {
        PendingRequests.Pending p = requests.answerable(source, requestId);
        if (p != null && p.expected.isInstance(m)) {
            p.future.complete(m);
        } else if (p != null) {
            p.future.completeExceptionally(new NetworkException(FailureReason.BAD_RESPONSE, "node " + source + " answered request " + requestId
                    + " with a " + m.getClass().getName() + ", not the " + p.expected.getName() + " the request declares"));
        }
    }
}
