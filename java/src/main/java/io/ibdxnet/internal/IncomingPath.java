package io.ibdxnet.internal;

import io.ibdxnet.DXNetConfig;
import io.ibdxnet.Message;
import io.ibdxnet.MessageHandler;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.core.StreamAssembler;
import io.ibdxnet.core.HandlerDispatch;
import io.ibdxnet.core.IncomingBufferQueue;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.core.ReceiveLimits;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.Transport;
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
 * Its parts: {@link ConnectionStreams} (a stream per connection),
 * {@link MessageCreation} (frames into messages), {@link HandlerBatches}
 * (batches for the handlers, their buffers' confirmation) and
 * {@link AfterReceived} (actions behind a source's buffers).
 */
public final class IncomingPath implements MessageSender.LocalDelivery {
    private static final ApiAccess API = ApiAccess.get();

    private static final Logger LOG = Logger.getLogger("io.ibdxnet.DXNet");
    /** What a queued message is accounted as beyond its payload (its objects). */
    static final int MESSAGE_OVERHEAD = 64;

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
    private final CoreCounters counters;
    private final RateLimitedLog warnings;
    private final ReceiveLimits limits;
    private final ConnectionStreams streams;
    private final MessageCreation creation;
    private final HandlerBatches batches;
    private final AfterReceived afters;
    /** Sends deferred by handlers that ran on a receiving thread are still waiting: hand the next batches to the pool. */
    private final java.util.function.BooleanSupplier receivingThreadSendsWaiting;
    private final Thread coordinator;
    /**
     * Held by whoever turns buffers into messages: the coordinator, or a
     * transport's receiving thread inline (see {@link #offer}). It guards the
     * assemblers, the batch and the importer.
     */
    private final ReentrantLock role = new ReentrantLock();
    private final AtomicLong inlineBuffers = new AtomicLong();
    private final AtomicLong handledOnReceivingThread = new AtomicLong();
    /** Role holder only: the batch being filled from the current buffer. */
    private HandlerBatches.Batch batch;
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
        this.counters = counters;
        this.warnings = warnings;
        this.limits = new ReceiveLimits(config.maxMessageSize, config.maxUnfinishedBytesPerConnection, config.maxUnfinishedBytes);
        this.streams = new ConnectionStreams(config.nodeId, limits, transport, requests, counters, warnings);
        this.batches = new HandlerBatches(config.nodeId, transport, counters, warnings, replier);
        this.batch = batches.newBatch();
        this.creation = new MessageCreation(config.nodeId, types, requests, counters, warnings, replier, losses, this);
        this.afters = new AfterReceived(config.nodeId, ibq, warnings);
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
                    boolean here = config.handleOnReceivingThread && handlers.idle(src) && !ResponseWait.polling()
                            && !receivingThreadSendsWaiting.getAsBoolean();
                    if (handle(b, here) == WAITS) {
                        ibq.offerHeld(b); // the rest waits for the node budget, first in its lane
                        waitForBudget(src);
                    }
                    afters.run();
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
        afters.add(source, action); // before the tryLock: a coordinator that holds the role sees it when it loops
        if (role.tryLock()) {
            try {
                afters.run();
            } finally {
                role.unlock();
            }
        }
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
                b = ibq.poll(budgetWaiting || afters.waiting() ? 1 : 1_000); // stop() interrupts the wait
            } catch (InterruptedException e) {
                return;
            }
            if (b == null && !budgetWaiting && !afters.waiting()) {
                continue; // a quiet second: taking the role would only turn a receiving thread's buffer to the pool
            }
            role.lock();
            try {
                resumeBudgetWaiters();
                afters.run();
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
                afters.run();
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
            fed = streams.parse(b, sink);
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
        HandlerBatches.Batch full = batch;
        batch = batches.newBatch();
        full.source = b.source;
        if (fed) {
            batches.hold(full, b);
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
        return batches.confirmHeld;
    }

    /** Role holder only: a message the assembler found in the current buffer. */
    private void received(int src, byte type, byte sub, int flags, int req, byte[] array, long at, int length) {
        if (array != null) {
            counters.receivedCopied.incrementAndGet(); // assembled in a heap array, not imported where it lay
        }
        creation.deliver(src, type, sub, flags, req, API.reset(importer, array, at, length), batch);
    }

    /** A message to the own node, as its own handler task. */
    @Override
    public void deliver(int source, byte type, byte subtype, int flags, int requestId, byte[] payload) {
        creation.deliver(source, type, subtype, flags, requestId, API.newImporter(payload, payload.length), null);
    }

    /** Queues {@code m} for {@code r}: into {@code into}, or as its own task. */
    void queue(int source, MessageHandler<Message> r, Message m, int size, HandlerBatches.Batch into) {
        HandlerBatches.Batch b = into != null ? into : batches.newBatch();
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

    /** What {@link MessageCreation#refuse} sends as the remote exception: read back as a {@link io.ibdxnet.NoReceiverException}. */
    static final class NoReceiver extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NoReceiver(String why) {
            super(why, null, false, false);
        }
    }

    /** Its class name, which the error response carries. */
    static final String NO_RECEIVER = NoReceiver.class.getName();
}
