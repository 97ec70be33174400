package io.ibdxnet;

import io.ibdxnet.core.Frame;
import io.ibdxnet.core.HandlerDispatch;
import io.ibdxnet.core.IncomingBufferQueue;
import io.ibdxnet.core.ProtocolViolation;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.core.ReceiveLimits;
import io.ibdxnet.core.StreamAssembler;
import io.ibdxnet.core.StreamBacklog;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.NodeId;
import io.ibdxnet.transport.Transport;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
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
final class IncomingPath implements MessageSender.LocalDelivery {
    private static final Logger LOG = Logger.getLogger(DXNet.class.getName());

    /** How a failed request handler is answered (through the send path). */
    interface ErrorReplier {
        void answerWithError(Request<?> request, Throwable e);
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
    private final Thread coordinator;
    private final AtomicReferenceArray<StreamAssembler> assemblers = new AtomicReferenceArray<>(NodeId.COUNT);
    /**
     * Held by whoever turns buffers into messages: the coordinator, or a
     * transport's receiving thread inline (see {@link #offer}). It guards the
     * assemblers, the batch and the importer.
     */
    private final ReentrantLock role = new ReentrantLock();
    private final AtomicLong inlineBuffers = new AtomicLong();
    /** Role holder only: the batch being filled from the current buffer. */
    private Batch batch = new Batch();
    /** Role holder only: one importer for every received message (valid during importPayload). */
    private final MessageImporter importer = new MessageImporter(null, 0, 0);
    private final StreamAssembler.Sink sink = this::received;
    /**
     * Role holder only: the streams whose assembler waits for the node budget,
     * by source, in the order they began to wait; their later buffers queue
     * behind them here. Nothing is parsed inline while one waits, so every
     * change of the limits happens on the coordinator, which then retries them.
     */
    private final Map<Integer, StreamBacklog> waiting = new LinkedHashMap<>();
    private volatile boolean anyWaiting;
    /** Role holder only: the limits' version the waiting streams were last fed at. */
    private long waitingSince;
    /** Bytes were consumed whose messages never reached a handler (stopped or closed meanwhile). */
    private volatile boolean consumedNotHandled;
    private volatile boolean running = true;

    IncomingPath(DXNetConfig config, Transport transport, IncomingBufferQueue ibq, HandlerDispatch handlers,
            MessageTypes types, PendingRequests requests, CoreCounters counters, RateLimitedLog warnings,
            ErrorReplier replier, Thread.UncaughtExceptionHandler onDeath) {
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
        this.coordinator = new Thread(this::coordinate, "dxnet-mcc-" + config.nodeId);
        this.coordinator.setDaemon(true);
        this.coordinator.setUncaughtExceptionHandler(onDeath);
    }

    void start() {
        coordinator.start();
    }

    boolean alive() {
        return coordinator.isAlive();
    }

    /** Bytes claimed by unfinished messages (bounded by the receive limits). */
    long unfinishedBytesClaimed() {
        return limits.claimed();
    }

    /**
     * Stops the coordinator and inline receiving (waiting up to {@code joinMs}
     * each). True if both ended and every message taken from a buffer
     * reached a handler.
     */
    boolean stop(long joinMs) {
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

        @Override
        public void run() {
            for (int i = 0; i < messages.size(); i++) {
                Message m = messages.get(i);
                try {
                    receivers.get(i).handle(m);
                } catch (Throwable e) { // a handler's failure must not end the handler thread
                    counters.handlerErrors.incrementAndGet();
                    LOG.log(Level.SEVERE, "receiver of " + m.getType() + "/" + m.getSubtype() + " failed", e);
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
     * buffer goes to the queue. Never blocks; false if the queue is full.
     */
    boolean offer(IncomingBuffer b) {
        if (config.receiveInline && ibq.idle() && running && role.tryLock()) {
            try {
                // Each source's buffers come from one thread, and none of them
                // waits in the queue: this one is next in its stream.
                if (ibq.idle() && running && !anyWaiting && handlers.tryReserve()) {
                    inlineBuffers.incrementAndGet();
                    handle(b, true);
                    return true;
                }
            } catch (Throwable e) { // the transport's thread must live on; what the buffer held is lost
                counters.streamErrors.incrementAndGet();
                LOG.log(Level.SEVERE, "node " + config.nodeId + ": receiving a buffer of node " + b.source + " failed", e);
                return true;
            } finally {
                role.unlock();
            }
        }
        return ibq.offer(b);
    }

    /** Buffers turned into messages by the transport's own thread (see {@link #offer}). */
    long inlineBuffers() {
        return inlineBuffers.get();
    }

    /** The message creation coordinator: queued buffers → messages, in order per source. */
    private void coordinate() {
        while (running) {
            IncomingBuffer b;
            try {
                b = ibq.poll(1_000); // stop() interrupts the wait
            } catch (InterruptedException e) {
                return;
            }
            role.lock();
            try {
                if (b != null && !handle(b, false) || !retryWaiting()) {
                    return;
                }
            } catch (InterruptedException e) {
                consumedNotHandled = true;
                return;
            } finally {
                if (b != null) {
                    ibq.finished();
                }
                role.unlock();
            }
        }
    }

    /**
     * Feeds the waiting streams again if the limits changed since they were
     * last fed, in the order they began to wait (the limits serve them first
     * come, first served); each stream's messages go to the handlers as one
     * batch, its bytes are confirmed once none of them waits any more.
     * Coordinator only. False if the handlers were shut down.
     */
    private boolean retryWaiting() throws InterruptedException {
        while (!waiting.isEmpty() && limits.version() != waitingSince) {
            waitingSince = limits.version();
            for (Integer source : new ArrayList<>(waiting.keySet())) {
                StreamBacklog w = waiting.get(source);
                StreamAssembler a = assemblers.get(source);
                boolean drained = true;
                try {
                    drained = w.feedTo(a, sink);
                } catch (ProtocolViolation e) {
                    counters.violations.incrementAndGet();
                    fail(a, "protocol violation: " + e.getMessage()); // drops the rest of the backlog
                } catch (Throwable e) {
                    counters.streamErrors.incrementAndGet();
                    LOG.log(Level.SEVERE, "node " + config.nodeId + ": the stream of node " + source + " failed", e);
                    fail(a, "receiving failed: " + e);
                }
                if (drained) {
                    waiting.remove(source);
                    w.confirm(transport);
                }
                if (!batch.messages.isEmpty()) {
                    Batch full = batch;
                    batch = new Batch();
                    if (!handlers.submit(source, full)) {
                        consumedNotHandled = true;
                        return false;
                    }
                }
            }
        }
        anyWaiting = !waiting.isEmpty();
        return true;
    }

    /**
     * One buffer into messages, one batch of them to the handlers (one
     * hand-off per buffer, not per message: waking a handler thread was the
     * top hotspot with small messages). Role holder only; {@code reserved}:
     * the handler room is taken already. False if the handlers were shut
     * down and messages taken from the buffer never reach one.
     */
    private boolean handle(IncomingBuffer b, boolean reserved) throws InterruptedException {
        boolean roomHandedOver = false;
        try {
            boolean fed = true;
            try {
                fed = parse(b, sink);
            } finally {
                b.release();
                if (fed) {
                    transport.consumed(b); // else confirmed once its stream fed it all (see waiting)
                }
            }
            if (batch.messages.isEmpty()) {
                return true;
            }
            Batch full = batch;
            batch = new Batch();
            roomHandedOver = reserved; // submitReserved uses the room or gives it back
            if (reserved ? handlers.submitReserved(b.source, full) : handlers.submit(b.source, full)) {
                return true;
            }
            consumedNotHandled = true;
            return false;
        } finally {
            if (reserved && !roomHandedOver) {
                handlers.unreserve(); // nothing to hand over, or a failure: the room must not leak
            }
        }
    }

    /**
     * One buffer into the stream of its connection. Whatever its bytes do,
     * only that connection suffers: a violation (or any other failure while
     * parsing) closes it, its unfinished messages are dropped and the rest of
     * its bytes skipped; every other stream and this thread go on. False if
     * the bytes wait for the node budget (kept in {@link #waiting}, not
     * confirmed yet).
     */
    private boolean parse(IncomingBuffer b, StreamAssembler.Sink sink) {
        StreamAssembler a = assemblers.get(b.source);
        if (a == null || a.connection() != b.connection) {
            if (a != null) {
                StreamBacklog w = waiting.remove(b.source);
                if (w != null) { // what the ended connection's stream held back is dropped
                    counters.bytesDropped.addAndGet(w.bytes());
                    w.confirm(transport);
                }
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
            StreamBacklog behind = waiting.get(b.source);
            if (behind != null) { // its stream waits: these bytes come after the ones held back
                behind.keep(b, 0);
                return false;
            }
            int done = a.feed(b.address, b.length, sink);
            if (a.waiting()) {
                StreamBacklog w = new StreamBacklog();
                w.keep(b, done);
                waiting.put(b.source, w);
                anyWaiting = true;
                return false;
            }
            return true;
        } catch (ProtocolViolation e) {
            counters.violations.incrementAndGet();
            reason = "protocol violation: " + e.getMessage();
        } catch (Throwable e) {
            counters.streamErrors.incrementAndGet();
            reason = "receiving failed: " + e;
            LOG.log(Level.SEVERE, "node " + config.nodeId + ": the stream of node " + b.source + " failed", e);
        }
        counters.bytesDropped.addAndGet(b.length);
        fail(a, reason);
        return true;
    }

    /** Closes the connection of a stream that broke; drops its unfinished messages. */
    private void fail(StreamAssembler a, String reason) {
        int source = a.source();
        StreamBacklog w = waiting.remove(source);
        if (w != null) { // what it held back is dropped, and confirmed as the rest of a broken stream is
            counters.bytesDropped.addAndGet(w.bytes());
            w.confirm(transport);
        }
        counters.partialsDropped.addAndGet(a.discard());
        warnings.warn(source, "node " + config.nodeId + ": closing the connection from node " + source + ": " + reason);
        try {
            transport.closeConnection(source, a.connection(), reason);
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "closing the connection from node " + source + " failed", e);
        }
        requests.failTo(source, "node " + source + " disconnected: " + reason);
    }

    /** Role holder only: a message the assembler found in the current buffer. */
    private void received(int src, byte type, byte sub, int flags, int req, byte[] array, long at, int length) {
        if (array != null) {
            counters.receivedCopied.incrementAndGet(); // assembled in a heap array, not imported where it lay
        }
        deliver(src, type, sub, flags, req, importer.reset(array, at, length), batch);
    }

    /** A message to the own node, as its own handler task. */
    @Override
    public void deliver(int source, byte type, byte subtype, int flags, int requestId, byte[] payload) {
        deliver(source, type, subtype, flags, requestId, new MessageImporter(payload, payload.length), null);
    }

    /** Creates the message and queues it for its receiver: into {@code into}, or as its own task. */
    private void deliver(int source, byte type, byte subtype, int flags, int requestId, MessageImporter payload, Batch into) {
        if ((flags & Frame.ERROR) != 0) {
            failRequest(source, requestId, payload);
            return;
        }
        Constructor<? extends Message> ctor = types.constructor(type, subtype);
        if (ctor == null) {
            counters.dropped.incrementAndGet();
            LOG.warning("node " + config.nodeId + ": message of unregistered type " + type + "/" + subtype + " from " + source + " dropped");
            return;
        }
        Message m;
        try {
            m = ctor.newInstance();
            m.source = source;
            m.destination = config.nodeId;
            m.importPayload(payload);
        } catch (Throwable e) { // a lying payload (or a failing import) drops this message only
            counters.dropped.incrementAndGet();
            LOG.log(Level.WARNING, "cannot create message " + type + "/" + subtype + " from " + source, e);
            return;
        }
        if ((flags & Frame.RESPONSE) != 0 && m instanceof Response) {
            ((Response) m).requestId = requestId;
            complete(source, requestId, (Response) m);
            return;
        }
        if (m instanceof Request) {
            ((Request<?>) m).requestId = requestId;
        }
        MessageHandler<Message> r = types.handler(type, subtype);
        if (r == null) {
            counters.dropped.incrementAndGet();
            LOG.warning("node " + config.nodeId + ": no receiver for " + type + "/" + subtype);
            return;
        }
        Batch b = into != null ? into : new Batch();
        b.receivers.add(r);
        b.messages.add(m);
        if (into == null) {
            try {
                if (!handlers.submit(source, b)) {
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

    /** An error response: the remote handler of request {@code requestId} threw. */
    private void failRequest(int source, int requestId, MessageImporter payload) {
        String cls;
        String msg;
        try {
            cls = payload.readString();
            msg = payload.readString();
        } catch (RuntimeException e) {
            counters.dropped.incrementAndGet();
            return;
        }
        PendingRequests.Pending p = requests.answerable(source, requestId);
        if (p != null) {
            p.future.completeExceptionally(new RemoteHandlerException(source, cls, msg.isEmpty() ? null : msg));
        }
    }

    /** A response: completes its request if it is of the class the request declared. */
    private void complete(int source, int requestId, Response m) {
        PendingRequests.Pending p = requests.answerable(source, requestId);
        if (p != null && p.expected.isInstance(m)) {
            p.future.complete(m);
        } else if (p != null) {
            p.future.completeExceptionally(new NetworkException("node " + source + " answered request " + requestId
                    + " with a " + m.getClass().getName() + ", not the " + p.expected.getName() + " the request declares"));
        }
    }
}
