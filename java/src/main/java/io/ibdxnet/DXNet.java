package io.ibdxnet;

import io.ibdxnet.core.Frame;
import io.ibdxnet.core.HandlerDispatch;
import io.ibdxnet.core.IncomingBufferQueue;
import io.ibdxnet.core.ProtocolViolation;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.core.ReceiveLimits;
import io.ibdxnet.core.StreamAssembler;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.NodeId;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * DXNet-style messaging over the InfiniBand transport: register message
 * types and receivers, send messages, send requests and wait for responses.
 * Messages to the own node are delivered locally.
 *
 * <p>Threads: the native engine's send, receive and job threads; one message
 * creation coordinator ("dxnet-mcc-N") that turns received buffers into
 * messages in order; a pool of message handlers ("dxnet-handler-N-i").
 *
 * <p><b>Order.</b> By default ({@link DXNetConfig#orderPerSender}) the
 * messages of one source node are handled one at a time, in the order they
 * arrived: what one thread sends to a node is handled there in the order it
 * was sent (messages of several sending threads interleave, each whole).
 * Messages of different source nodes are handled on different handler
 * threads at once, so a slow handler delays only later messages of its own
 * source. With {@code orderPerSender = false} any handler thread takes any
 * message: one sender's messages may then be handled concurrently, in any
 * order. Responses never wait behind messages: they complete the request's
 * future as soon as they are received.
 */
public final class DXNet implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(DXNet.class.getName());

    private final DXNetConfig config;
    private final Transport transport;
    private final IncomingBufferQueue ibq;
    private final Thread coordinator;
    private final HandlerDispatch handlers;
    /** By {@link #key}: arrays, not maps (a boxed key per message showed in profiles). */
    private final AtomicReferenceArray<Constructor<? extends Message>> types = new AtomicReferenceArray<>(1 << 16);
    /** Each handler takes the class {@link #types} creates for its key. */
    private final AtomicReferenceArray<MessageHandler<Message>> receivers = new AtomicReferenceArray<>(1 << 16);
    /** Requests waiting for their response, by request id. */
    private final Map<Integer, Pending> pending = new ConcurrentHashMap<>();
    /** Fails requests whose {@code requestTimeoutMs} passed (a sweep every 10 ms). */
    private final java.util.concurrent.ScheduledExecutorService timeouts;
    private final AtomicInteger nextRequestId = new AtomicInteger(1);
    private final AtomicInteger nextMessageId = new AtomicInteger();
    private final AtomicReferenceArray<StreamAssembler> assemblers = new AtomicReferenceArray<>(NodeId.COUNT);
    private final AtomicLong dropped = new AtomicLong();
    private final ReceiveLimits limits;
    private final AtomicLong violations = new AtomicLong();
    private final AtomicLong streamErrors = new AtomicLong();
    private final AtomicLong partialsDropped = new AtomicLong();
    private final AtomicLong bytesDropped = new AtomicLong();
    private final AtomicLong responsesRefused = new AtomicLong();
    private final AtomicLong handlerErrors = new AtomicLong();
    private final AtomicLong repliesFailed = new AtomicLong();
    private final AtomicLong possibleLosses = new AtomicLong();
    private volatile LossListener lossListener;
    private final RateLimitedLog warnings = new RateLimitedLog(LOG, 1_000);
    /** Why a thread of the core died (null while healthy): the node would otherwise go deaf silently. */
    private volatile Throwable failure;
    /** The coordinator consumed bytes whose messages never reached a handler (stopped or closed meanwhile). */
    private volatile boolean consumedNotHandled;
    private volatile boolean running = true;

    private DXNet(DXNetConfig config) throws NetworkException {
        config.validate();
        this.config = config;
        this.limits = new ReceiveLimits(config.maxMessageSize, config.maxUnfinishedBytesPerConnection, config.maxUnfinishedBytes);
        this.ibq = new IncomingBufferQueue(config.ibqMaxBuffers, config.ibqMaxBytes);
        TransportListener listener = new TransportListener() {
            @Override
            public boolean onBuffer(IncomingBuffer b) {
                return ibq.offer(b);
            }

            @Override
            public void onDisconnected(int node) {
                failRequestsTo(node, "node " + node + " disconnected");
            }

            @Override
            public void onPossibleLoss(int node, long bytes, String reason) {
                possibleLosses.incrementAndGet();
                LossListener l = lossListener;
                if (l != null) {
                    try {
                        l.possiblyLost(node, bytes, reason);
                        return;
                    } catch (RuntimeException e) {
                        LOG.log(Level.WARNING, "the loss listener failed", e);
                    }
                }
                warnings.warn(node, "node " + config.nodeId + ": messages sent to node " + node + " may be lost ("
                        + (bytes < 0 ? "" : bytes + " bytes unconfirmed, ") + reason + ")");
            }
        };
        this.transport = Transports.open(config, listener);
        for (Map.Entry<Integer, String> n : config.nodes.entrySet()) {
            if (n.getKey() != config.nodeId) {
                addNode(n.getKey(), n.getValue());
            }
        }
        // Full: the coordinator waits (backpressure) instead of running the
        // task itself, which would reorder messages.
        this.handlers = new HandlerDispatch("dxnet-handler-" + config.nodeId + "-", config.handlerThreads,
                config.handlerQueueSize, config.orderPerSender);
        this.coordinator = new Thread(this::coordinate, "dxnet-mcc-" + config.nodeId);
        this.coordinator.setDaemon(true);
        this.coordinator.setUncaughtExceptionHandler((t, e) -> failed(t, e));
        this.timeouts = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "dxnet-timeouts-" + config.nodeId);
            t.setDaemon(true);
            return t;
        });
        this.timeouts.scheduleWithFixedDelay(this::expireRequests, 10, 10, TimeUnit.MILLISECONDS);
        this.coordinator.start();
    }

    /** Starts a node. */
    public static DXNet start(DXNetConfig config) throws NetworkException {
        return new DXNet(config);
    }

    /** Starts a node from a JSON or key=value configuration file (see {@link DXNetConfig#load}). */
    public static DXNet start(java.nio.file.Path configFile) throws NetworkException, java.io.IOException {
        return new DXNet(DXNetConfig.load(configFile));
    }

    /** This node's id. */
    public int nodeId() {
        return config.nodeId;
    }

    /** The UDP port of this node's connection manager (for other nodes' tables). */
    public int localPort() {
        return transport.localPort();
    }

    /** Adds a node to the node table ("host:port"). */
    public void addNode(int id, String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        transport.addNode(id, hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
    }

    /** A request in flight: who must answer it, and until when. */
    private static final class Pending {
        final CompletableFuture<Response> future = new CompletableFuture<>();
        final int target;
        final int requestId;
        final int timeoutMs;
        final long deadline;
        /** The response class the request declared ({@link ResponseTypes}). */
        final Class<?> expected;

        Pending(int target, int requestId, int timeoutMs, Class<?> expected) {
            this.target = target;
            this.requestId = requestId;
            this.timeoutMs = timeoutMs;
            this.expected = expected;
            this.deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        }
    }

    /** The message a failed request handler sends back instead of a response (never registered). */
    private static final class ErrorResponse extends Response {
        final String remoteClass;
        final String remoteMessage;

        ErrorResponse(Request<?> failed, Throwable e) {
            super(failed, failed.getType(), failed.getSubtype());
            this.remoteClass = e.getClass().getName();
            this.remoteMessage = e.getMessage() == null ? "" : e.getMessage();
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeString(remoteClass);
            out.writeString(remoteMessage);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            throw new UnsupportedOperationException("read in DXNet.deliver");
        }
    }

    private static int key(byte type, byte subtype) {
        return (type & 0xFF) << 8 | (subtype & 0xFF);
    }

    /** Makes {@code type/subtype} known; {@code c} needs a no-argument constructor. */
    public void registerMessageType(byte type, byte subtype, Class<? extends Message> c) {
        try {
            Constructor<? extends Message> ctor = c.getDeclaredConstructor();
            ctor.setAccessible(true);
            Constructor<? extends Message> old = types.compareAndExchange(key(type, subtype), null, ctor);
            if (old != null && !old.equals(ctor)) {
                throw new IllegalArgumentException("type " + type + "/" + subtype + " is already registered to " + old.getDeclaringClass().getName());
            }
        } catch (NoSuchMethodException e) {
            throw new IllegalArgumentException(c.getName() + " has no no-argument constructor", e);
        }
    }

    /** Makes {@code type} known; {@code c} needs a no-argument constructor. */
    public void registerMessageType(MessageType type, Class<? extends Message> c) {
        registerMessageType(type.type(), type.subtype(), c);
    }

    /**
     * Delivers messages of {@code type/subtype} to {@code receiver} on handler
     * threads, in order per source node (see the class comment, "Order").
     */
    public void register(byte type, byte subtype, MessageReceiver receiver) {
        receivers.set(key(type, subtype), receiver::onIncomingMessage);
    }

    /** {@link #register(byte, byte, MessageReceiver)} with a {@link MessageType}. */
    public void register(MessageType type, MessageReceiver receiver) {
        register(type.type(), type.subtype(), receiver);
    }

    /**
     * Registers message class {@code c} under the type its no-argument
     * constructor gives it, and delivers its messages to {@code handler},
     * typed: {@code register(Put.class, put -> store(put.key, put.value))}.
     * Runs on handler threads, in order per source node (see the class
     * comment, "Order"); a handler that throws answers a request with a
     * {@link RemoteHandlerException} on the requester's side.
     */
    public <M extends Message> void register(Class<M> c, MessageHandler<? super M> handler) {
        Message probe;
        try {
            Constructor<M> ctor = c.getDeclaredConstructor();
            ctor.setAccessible(true);
            probe = ctor.newInstance();
        } catch (NoSuchMethodException e) {
            throw new IllegalArgumentException(c.getName() + " has no no-argument constructor", e);
        } catch (ReflectiveOperationException e) {
            throw new IllegalArgumentException("cannot create a " + c.getName() + " to learn its type: " + e, e);
        }
        register(probe.getMessageType(), c, handler);
    }

    /**
     * Registers message class {@code c} under {@code type} and delivers its
     * messages to {@code handler}, typed (as {@link #register(Class, MessageHandler)}).
     */
    @SuppressWarnings("unchecked")
    public <M extends Message> void register(MessageType type, Class<M> c, MessageHandler<? super M> handler) {
        registerMessageType(type, c);
        // Safe: the key creates instances of c only (registerMessageType refuses another class).
        receivers.set(key(type.type(), type.subtype()), (MessageHandler<Message>) (MessageHandler<?>) handler);
    }

    /** Sends {@code message} to its destination. */
    public void sendMessage(Message message) throws NetworkException {
        send(message, 0, 0);
    }

    /**
     * Sends {@code response} as the answer to {@code request} (it is addressed
     * to the request's source here). Throws no checked exception, so a
     * handler needs no try block: a reply that cannot be sent is logged
     * (at most once a second per node) and counted ({@code replies_failed}),
     * and the requester learns of it: when the connection failed its request
     * fails with a {@link NetworkException}; when the reply itself is invalid
     * (e.g. larger than {@code maxMessageSize}) it gets a
     * {@link RemoteHandlerException} naming the problem; else (the send timed
     * out) its request times out. Returns whether the reply was sent.
     */
    public <R extends Response> boolean reply(Request<R> request, R response) {
        response.answer(request);
        try {
            send(response, 0, 0);
            return true;
        } catch (NetworkException e) {
            repliesFailed.incrementAndGet();
            warnings.warn(request.getSource(), "node " + config.nodeId + ": the reply to request " + request.requestId
                    + " of node " + request.getSource() + " was not sent: " + e.getMessage());
        } catch (RuntimeException e) {
            repliesFailed.incrementAndGet();
            LOG.log(Level.WARNING, "node " + config.nodeId + ": the reply to request " + request.requestId + " of node "
                    + request.getSource() + " is invalid", e);
            answerWithError(request, e);
        }
        return false;
    }

    /**
     * Sends {@code request} and waits for its response, at most
     * {@code timeoutMs}: then {@link RequestTimeoutException}. A handler that
     * threw on the remote node ends the wait with {@link RemoteHandlerException}.
     */
    public <R extends Response> R sendSync(Request<R> request, int timeoutMs) throws NetworkException {
        CompletableFuture<R> f = sendAsync(request, timeoutMs);
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new NetworkException("interrupted while waiting for a response", e);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            throw cause instanceof NetworkException ? (NetworkException) cause : new NetworkException(cause.toString(), cause);
        }
    }

    /** {@link #sendSync(Request, int)} with the configured {@code requestTimeoutMs}. */
    public <R extends Response> R sendSync(Request<R> request) throws NetworkException {
        return sendSync(request, config.requestTimeoutMs);
    }

    /**
     * Sends {@code request}; the future completes with the response, or
     * exceptionally: {@link RequestTimeoutException} after
     * {@code requestTimeoutMs}, {@link RemoteHandlerException}, or
     * {@link NetworkException} when the connection fails (or the peer answered
     * with another class than the request declared). A caller that stops
     * waiting earlier leaves nothing behind: the entry goes at the timeout.
     */
    public <R extends Response> CompletableFuture<R> sendAsync(Request<R> request) throws NetworkException {
        return sendAsync(request, config.requestTimeoutMs);
    }

    /** {@link #sendAsync(Request)} with its own timeout. */
    @SuppressWarnings("unchecked")
    public <R extends Response> CompletableFuture<R> sendAsync(Request<R> request, int timeoutMs) throws NetworkException {
        if (timeoutMs <= 0) {
            throw new IllegalArgumentException("request timeout must be positive: " + timeoutMs);
        }
        int id = nextRequestId.getAndIncrement();
        request.requestId = id;
        Pending p = new Pending(request.getDestination(), id, timeoutMs, ResponseTypes.expected(request));
        pending.put(id, p);
        try {
            send(request, Frame.REQUEST, id);
        } catch (NetworkException | RuntimeException e) {
            pending.remove(id);
            throw e;
        }
        // Safe: deliver completes it only with an instance of p.expected, R's class.
        return (CompletableFuture<R>) (CompletableFuture<?>) p.future;
    }

    /** Timeout thread: fails the requests whose deadline passed. */
    private void expireRequests() {
        long now = System.nanoTime();
        for (Pending p : pending.values()) {
            if (now - p.deadline >= 0 && pending.remove(p.requestId, p)) {
                p.future.completeExceptionally(new RequestTimeoutException("no response to request " + p.requestId
                        + " from node " + p.target + " within " + p.timeoutMs + " ms"));
            }
        }
    }

    /** Requests waiting for a response (each leaves at its response, failure or timeout). */
    public int pendingRequests() {
        return pending.size();
    }

    private void send(Message m, int kindFlags, int requestId) throws NetworkException {
        if (!running) {
            throw new NetworkException("DXNet is closed");
        }
        int dest = m.getDestination();
        if (!NodeId.isValid(dest)) {
            throw new IllegalArgumentException("message has no valid destination (" + dest + ")");
        }
        if (m instanceof Response) {
            kindFlags = m instanceof ErrorResponse ? Frame.RESPONSE | Frame.ERROR : Frame.RESPONSE;
            requestId = ((Response) m).requestId;
        }
        m.source = config.nodeId;
        SendScratch scratch = SCRATCH.get();
        if (scratch.busy) {
            scratch = new SendScratch(); // a message exported while exporting another
        }
        scratch.busy = true;
        try {
            sendFrames(m, dest, kindFlags, requestId, scratch);
        } finally {
            scratch.release();
        }
    }

    /** Per-thread serialization buffer and frame header, reused (two allocations per message less). */
    private static final class SendScratch {
        MessageExporter out = new MessageExporter(256);
        final byte[] header = new byte[Frame.HEADER];
        boolean busy;

        void release() {
            busy = false;
            if (out.array().length > 1 << 20) {
                out = new MessageExporter(256); // do not keep a huge buffer per thread
            }
        }
    }

    private static final ThreadLocal<SendScratch> SCRATCH = ThreadLocal.withInitial(SendScratch::new);

    private void sendFrames(Message m, int dest, int kindFlags, int requestId, SendScratch scratch) throws NetworkException {
        MessageExporter out = scratch.out;
        out.reset();
        m.exportPayload(out);
        int total = out.size();
        if (total > config.maxMessageSize) {
            throw new IllegalArgumentException("message " + m.getType() + "/" + m.getSubtype() + " of " + total
                    + " bytes exceeds maxMessageSize (" + config.maxMessageSize + ")");
        }
        if (dest == config.nodeId) {
            byte[] copy = java.util.Arrays.copyOf(out.array(), total);
            deliver(config.nodeId, m.getType(), m.getSubtype(), kindFlags | Frame.FIRST | Frame.LAST, requestId, copy);
            return;
        }
        int messageId = nextMessageId.getAndIncrement();
        int chunk = transport.maxFrameSize() - Frame.HEADER;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(config.sendTimeoutMs);
        byte[] header = scratch.header;
        int at = 0;
        do {
            int n = Math.min(chunk, total - at);
            int flags = kindFlags | (at == 0 ? Frame.FIRST : 0) | (at + n == total ? Frame.LAST : 0);
            Frame.writeHeader(header, Frame.HEADER + n, messageId, m.getType(), m.getSubtype(), flags, requestId, total);
            transport.send(dest, header, out.array(), at, n, deadline);
            at += n;
        } while (at < total);
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
                    handlerErrors.incrementAndGet();
                    LOG.log(Level.SEVERE, "receiver of " + m.getType() + "/" + m.getSubtype() + " failed", e);
                    if (m instanceof Request) {
                        answerWithError((Request<?>) m, e);
                    }
                }
            }
        }
    }

    private Batch batch = new Batch(); // coordinator thread only
    /** Coordinator thread only: one importer for every received message (valid during importPayload). */
    private final MessageImporter importer = new MessageImporter(null, 0, 0);

    /** The message creation coordinator: buffers → messages, in order per source. */
    private void coordinate() {
        // One hand-off per buffer, not per message: waking a handler thread
        // (unpark) was the top hotspot with small messages.
        StreamAssembler.Sink sink = (src, type, sub, flags, req, array, at, length) ->
                deliver(src, type, sub, flags, req, importer.reset(array, at, length), batch);
        while (running) {
            IncomingBuffer b;
            try {
                b = ibq.poll(100);
            } catch (InterruptedException e) {
                return;
            }
            if (b == null) {
                continue;
            }
            try {
                parse(b, sink);
            } finally {
                b.release();
                transport.consumed(b);
            }
            if (!batch.messages.isEmpty()) {
                try {
                    if (!handlers.submit(b.source, batch)) {
                        consumedNotHandled = true;
                        return;
                    }
                } catch (InterruptedException e) {
                    consumedNotHandled = true;
                    return;
                }
                batch = new Batch();
            }
        }
    }

    /**
     * One buffer into the stream of its connection. Whatever its bytes do,
     * only that connection suffers: a violation (or any other failure while
     * parsing) closes it, its unfinished messages are dropped and the rest of
     * its bytes skipped; every other stream and this thread go on.
     */
    private void parse(IncomingBuffer b, StreamAssembler.Sink sink) {
        StreamAssembler a = assemblers.get(b.source);
        if (a == null || a.connection() != b.connection) {
            if (a != null) {
                partialsDropped.addAndGet(a.discard()); // its connection ended: a new stream starts
            }
            a = new StreamAssembler(b.source, b.connection, limits);
            assemblers.set(b.source, a);
        }
        if (a.broken()) {
            bytesDropped.addAndGet(b.length);
            return;
        }
        String reason;
        try {
            a.feed(b.address, b.length, sink);
            return;
        } catch (ProtocolViolation e) {
            violations.incrementAndGet();
            reason = "protocol violation: " + e.getMessage();
        } catch (Throwable e) {
            streamErrors.incrementAndGet();
            reason = "receiving failed: " + e;
            LOG.log(Level.SEVERE, "node " + config.nodeId + ": the stream of node " + b.source + " failed", e);
        }
        partialsDropped.addAndGet(a.discard());
        bytesDropped.addAndGet(b.length);
        warnings.warn(b.source, "node " + config.nodeId + ": closing the connection from node " + b.source + ": " + reason);
        try {
            transport.closeConnection(b.source, b.connection, reason);
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "closing the connection from node " + b.source + " failed", e);
        }
        failRequestsTo(b.source, "node " + b.source + " disconnected: " + reason);
    }

    /** The requester learns that our handler failed (instead of waiting out its timeout). */
    private void answerWithError(Request<?> r, Throwable e) {
        try {
            send(new ErrorResponse(r, e), 0, 0);
        } catch (NetworkException | RuntimeException x) {
            LOG.log(Level.WARNING, "could not tell node " + r.getSource() + " that its request " + r.requestId + " failed", x);
        }
    }

    /** A thread of the core died: reported, never silent. */
    private void failed(Thread t, Throwable e) {
        failure = e;
        LOG.log(Level.SEVERE, "node " + config.nodeId + ": thread " + t.getName() + " died; this node no longer receives", e);
    }

    private void deliver(int source, byte type, byte subtype, int flags, int requestId, byte[] payload) {
        deliver(source, type, subtype, flags, requestId, new MessageImporter(payload, payload.length), null);
    }

    /** Creates the message and queues it for its receiver: into {@code into}, or as its own task. */
    private void deliver(int source, byte type, byte subtype, int flags, int requestId, MessageImporter payload, Batch into) {
        if ((flags & Frame.ERROR) != 0) {
            String cls;
            String msg;
            try {
                cls = payload.readString();
                msg = payload.readString();
            } catch (RuntimeException e) {
                dropped.incrementAndGet();
                return;
            }
            Pending p = answerable(source, requestId);
            if (p != null) {
                p.future.completeExceptionally(new RemoteHandlerException(source, cls, msg.isEmpty() ? null : msg));
            }
            return;
        }
        Constructor<? extends Message> ctor = types.get(key(type, subtype));
        if (ctor == null) {
            dropped.incrementAndGet();
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
            dropped.incrementAndGet();
            LOG.log(Level.WARNING, "cannot create message " + type + "/" + subtype + " from " + source, e);
            return;
        }
        if ((flags & Frame.RESPONSE) != 0 && m instanceof Response) {
            ((Response) m).requestId = requestId;
            Pending p = answerable(source, requestId);
            if (p != null && p.expected.isInstance(m)) {
                p.future.complete((Response) m);
            } else if (p != null) {
                p.future.completeExceptionally(new NetworkException("node " + source + " answered request " + requestId
                        + " with a " + m.getClass().getName() + ", not the " + p.expected.getName() + " the request declares"));
            }
            return;
        }
        if (m instanceof Request) {
            ((Request<?>) m).requestId = requestId;
        }
        MessageHandler<Message> r = receivers.get(key(type, subtype));
        if (r == null) {
            dropped.incrementAndGet();
            LOG.warning("node " + config.nodeId + ": no receiver for " + type + "/" + subtype);
            return;
        }
        Batch b = into != null ? into : new Batch();
        b.receivers.add(r);
        b.messages.add(m);
        if (into == null) {
            try {
                if (!handlers.submit(source, b)) {
                    dropped.incrementAndGet(); // closed meanwhile
                    consumedNotHandled = true;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                dropped.incrementAndGet();
                consumedNotHandled = true;
            }
        }
    }

    /**
     * The pending request {@code requestId}, taken out, if {@code source} may
     * answer it: only the node the request went to may (counted otherwise).
     * Null also for a late answer after the timeout (counted as dropped).
     */
    private Pending answerable(int source, int requestId) {
        Pending p = pending.get(requestId);
        if (p != null && p.target != source) {
            responsesRefused.incrementAndGet();
            warnings.warn(source, "node " + config.nodeId + ": response to request " + requestId + " from node " + source
                    + ", which the request did not go to (node " + p.target + "), refused");
            return null;
        }
        if (p == null || !pending.remove(requestId, p)) {
            dropped.incrementAndGet(); // late response after a timeout
            return null;
        }
        return p;
    }

    private void failRequestsTo(int node, String reason) {
        for (Pending p : pending.values()) {
            if (p.target == node && pending.remove(p.requestId, p)) {
                p.future.completeExceptionally(new NetworkException(reason));
            }
        }
    }

    /** Messages dropped (unknown type, no receiver, late response, bad payload). */
    public long droppedMessages() {
        return dropped.get();
    }

    /**
     * What this node holds for a slow consumer: received buffers waiting for
     * the message creation coordinator (bounded by {@code ibqMaxBuffers})…
     */
    public int incomingBuffersQueued() {
        return ibq.size();
    }

    /** …their bytes (bounded by {@code ibqMaxBytes}, or one buffer when it alone is larger)… */
    public long incomingBytesQueued() {
        return ibq.bytes();
    }

    /** …and message batches waiting for a handler thread (bounded by {@code handlerQueueSize}). */
    public int handlerBatchesQueued() {
        return handlers.queued();
    }

    /** The largest frame the transport carries; larger messages are sent in frames of this size. */
    public int maxFrameSize() {
        return transport.maxFrameSize();
    }

    /** The device the transport runs on (e.g. {@code rxe0}, {@code sim2}). */
    public String fabricName() {
        return transport.name();
    }

    /**
     * The transport's counters and the core's: {@code protocol_violations}
     * (connections closed for breaking the frame format or a limit, added to
     * the transport's own count), {@code stream_errors},
     * {@code partial_messages_dropped} (unfinished when their connection ended
     * or broke), {@code bytes_dropped_after_violation},
     * {@code responses_from_wrong_node}, {@code handler_errors},
     * {@code replies_failed} ({@link #reply} could not send),
     * {@code possible_losses} (connections that failed with data unconfirmed),
     * {@code unfinished_bytes_claimed}.
     */
    public Map<String, Long> transportStats() {
        Map<String, Long> m = new java.util.LinkedHashMap<>(transport.stats());
        m.merge("protocol_violations", violations.get(), Long::sum);
        m.put("stream_errors", streamErrors.get());
        m.put("partial_messages_dropped", partialsDropped.get());
        m.put("bytes_dropped_after_violation", bytesDropped.get());
        m.put("responses_from_wrong_node", responsesRefused.get());
        m.put("handler_errors", handlerErrors.get());
        m.put("replies_failed", repliesFailed.get());
        m.put("possible_losses", possibleLosses.get());
        m.put("unfinished_bytes_claimed", limits.claimed());
        return m;
    }

    /**
     * Told when a connection failed while messages whose {@code sendMessage}
     * had returned were not yet confirmed by the receiver: they may be lost.
     * Without a listener this is logged (at most once a second per node).
     */
    public interface LossListener {
        /** {@code bytes} to {@code node} may not have arrived ({@code -1}: unknown how many). */
        void possiblyLost(int node, long bytes, String reason);
    }

    /** Sets the {@link LossListener} (null: log instead); runs on a transport thread, must not block. */
    public void setLossListener(LossListener listener) {
        this.lossListener = listener;
    }

    /** True while every thread of the core runs; see {@link #failure}. */
    public boolean healthy() {
        return failure == null && coordinator.isAlive() == running;
    }

    /** What killed a thread of the core (the node no longer receives), or null. */
    public Throwable failure() {
        return failure;
    }

    @Override
    public void close() {
        if (!running) {
            return;
        }
        running = false;
        coordinator.interrupt();
        try {
            coordinator.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        // Let the handlers finish what the coordinator handed them (up to the
        // request timeout): then the peers can be told exactly what was handled.
        boolean exact = !coordinator.isAlive() && !consumedNotHandled;
        try {
            exact = exact && handlers.awaitIdle(config.requestTimeoutMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            exact = false;
        }
        if (exact) {
            transport.closeAfterHandlingEverythingConsumed();
        } else {
            transport.close();
        }
        handlers.shutdown();
        timeouts.shutdownNow();
        for (Pending p : pending.values()) {
            p.future.completeExceptionally(new NetworkException("DXNet closed"));
        }
        pending.clear();
    }
}
