package io.ibdxnet;

import io.ibdxnet.core.Frame;
import io.ibdxnet.core.HandlerDispatch;
import io.ibdxnet.core.IncomingBufferQueue;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.internal.CoreCounters;
import io.ibdxnet.internal.DeferredMessage;
import io.ibdxnet.internal.DeferredSends;
import io.ibdxnet.internal.DropNotice;
import io.ibdxnet.internal.DropNotices;
import io.ibdxnet.internal.ErrorResponse;
import io.ibdxnet.internal.IncomingPath;
import io.ibdxnet.internal.MessageSender;
import io.ibdxnet.internal.MessageTypes;
import io.ibdxnet.internal.PendingRequests;
import io.ibdxnet.internal.ResponseTypes;
import io.ibdxnet.internal.Transports;
import io.ibdxnet.transport.IdleStrategy;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.Consumer;
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
 * future as soon as they are received. {@link #sendAsync} keeps the order
 * without blocking: a request it cannot send at once is queued for its node
 * (a lane per node), later async sends to that node queue behind it,
 * and a synchronous send to that node first waits (within its own deadline)
 * until what was queued before it went out.
 *
 * <p><b>Deadlines.</b> A request's timeout is one deadline from the call for
 * connecting, ring and window waits (at most {@code sendTimeoutMs} as well)
 * and the answer; {@code sendMessage} and {@code reply} wait up to
 * {@code sendTimeoutMs} ({@code handlerSendTimeoutMs} on a handler thread).
 */
public final class DXNet implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(DXNet.class.getName());
    /**
     * How long {@link #close} waits for what was sent to leave this node
     * before it closes the connections (a peer that does not read holds it
     * this long at most).
     */
    static final long SEND_ON_CLOSE_MS = 2_000;
    /**
     * A disconnect fails the node's pending requests this much later (and
     * after what it sent before was parsed): an answer still on its way
     * through the transport's receive path completes its request instead.
     */
    static final long DISCONNECT_GRACE_MS = 100;

    private final DXNetConfig config;
    private final CoreCounters counters = new CoreCounters();
    private final RateLimitedLog warnings = new RateLimitedLog(LOG, 1_000);
    private final PendingRequests requests;
    private final MessageTypes types = new MessageTypes();
    private final IncomingBufferQueue ibq;
    private final Transport transport;
    private final MessageSender sender;
    /** Async sends that had to wait, sent in order by a small pool. */
    private final DeferredSends deferred;
    private final HandlerDispatch handlers;
    private final IncomingPath incoming;
    /** Plain messages dropped here, summed per source until it is told. */
    private final DropNotices drops;
    private final io.ibdxnet.metrics.NodeMetrics metrics;
    private volatile LossListener lossListener;
    private volatile ConnectionListener connectionListener;
    /** Why a thread of the core died (null while healthy): the node would otherwise go deaf silently. */
    private volatile Throwable failure;
    private volatile boolean running = true;

    private DXNet(DXNetConfig config) throws NetworkException {
        config.validate();
        this.config = config;
        this.requests = new PendingRequests(config.nodeId, counters, warnings);
        this.ibq = new IncomingBufferQueue(config.ibqMaxBuffers, config.ibqMaxBytes, config.ibqMaxBuffersPerSource,
                config.ibqMaxBytesPerSource);
        this.transport = Transports.open(config, new TransportListener() {
            @Override
            public boolean onBuffer(IncomingBuffer b) {
                IncomingPath in = incoming; // null while starting: the coordinator takes those from the queue
                return in != null ? in.offer(b) : ibq.offer(b);
            }

            @Override
            public void onConnected(int node) {
                connectionEvent(node, true);
            }

            @Override
            public void onDisconnected(int node) {
                // The requests pending now fail once what the node sent before it
                // went was parsed: an answer among it completes its request. The
                // event can come on another thread than the data (ib: the job
                // thread, the data on the receive thread), hence a short grace first.
                List<PendingRequests.Pending> pending = requests.pendingTo(node);
                if (!pending.isEmpty()) {
                    Runnable fail = () -> requests.fail(pending, "node " + node + " disconnected");
                    requests.later(DISCONNECT_GRACE_MS, () -> {
                        IncomingPath in = incoming;
                        if (in != null) {
                            in.afterReceived(node, fail);
                        } else {
                            fail.run();
                        }
                    });
                }
                connectionEvent(node, false);
            }

            @Override
            public void onPossibleLoss(int node, long bytes, String reason) {
                possiblyLost(node, bytes, reason);
            }
        });
        HandlerDispatch dispatch = null;
        try {
            for (Map.Entry<Integer, String> n : config.nodes.entrySet()) {
                if (n.getKey() != config.nodeId) {
                    addNode(n.getKey(), n.getValue());
                }
            }
            // A source over its share is not read (backpressure on it alone); the
            // receive path never blocks on the handlers.
            dispatch = new HandlerDispatch("dxnet-handler-" + config.nodeId + "-", config.handlerThreads,
                    config.handlerQueueSize, config.handlerQueueBytes, config.handlerQueueBytesPerSource,
                    config.orderPerSender);
            this.handlers = dispatch;
            ibq.fitTo(transport);
            this.deferred = new DeferredSends(config.nodeId, config.maxDeferredBytesPerNode, this::sendDeferred,
                    this::deferredEnded);
            this.drops = new DropNotices(this::tellDropped, requests::later, System::nanoTime);
            this.incoming = new IncomingPath(config, transport, ibq, handlers, types, requests, counters, warnings,
                    this::answerWithError, new IncomingPath.Losses() {
                        @Override
                        public void dropped(int source, String cause, long bytes) {
                            drops.dropped(source, cause, bytes);
                        }

                        @Override
                        public void reported(int source, long messages, long bytes, String causes) {
                            dropReported(source, messages, bytes, causes);
                        }
                    }, deferred::receivingThreadSendsWaiting, this::failed);
            this.sender = new MessageSender(config, transport, incoming);
            requests.onClose(deferred::shutdown);
        } catch (RuntimeException | Error e) {
            // A failed start leaves nothing behind: no thread, no port (a retry in this JVM must work).
            running = false;
            if (dispatch != null) {
                dispatch.shutdown();
            }
            try {
                transport.close();
            } catch (Exception closing) {
                e.addSuppressed(closing);
            }
            throw e;
        }
        // Nothing received is parsed yet (it waits in the incoming buffer queue):
        // start(config, beforeReceiving) runs the registrations first, then incoming.start().
        this.requests.start();
        this.metrics = io.ibdxnet.metrics.NodeMetrics.start(config.nodeId,
                io.ibdxnet.metrics.NodeMetrics.kindOf(transport), this::coreStats, transport::stats,
                config.statsIntervalMs);
    }

    /**
     * Starts a node. It is reachable once its transport runs, before this
     * returns (peers of {@link DXNetConfig#nodes} may connect and send while
     * it starts), so a message that arrives before its receiver is
     * registered is dropped (its sender hears of it through its
     * {@link LossListener}). Where peers may already be sending, start with
     * {@link #start(DXNetConfig, Consumer)} and register there.
     *
     * @param config the node's configuration (checked here; it must not be changed afterwards)
     * @return the running node; {@link #close} it
     * @throws NetworkException if the transport cannot start (e.g. its port is taken); a failed
     *     start leaves no thread and no port behind
     * @throws IllegalArgumentException if the configuration is invalid (the message names the key)
     */
    public static DXNet start(DXNetConfig config) throws NetworkException {
        return start(config, node -> {});
    }

    /**
     * Starts a node and runs {@code beforeReceiving} on it before anything it
     * receives is handled: the way to start when peers may already be sending
     * to it (a node restarting into a running cluster). The transport runs
     * first (the node has its port and may be configured, {@link #addNode}
     * included); then {@code beforeReceiving} registers the message types and
     * receivers; only after it returns is received data turned into messages
     * and handed to the receivers. What arrives meanwhile waits, unconfirmed,
     * in the incoming buffer queue (bounded by {@code ibqMaxBuffers} and
     * {@code ibqMaxBytes}; beyond them the senders are held back by flow
     * control), so keep it short. Responses are not read meanwhile either: a
     * {@link #sendSync} inside it waits until its timeout.
     *
     * @param config the node's configuration (checked here; it must not be changed afterwards)
     * @param beforeReceiving registers the node's message types and receivers; runs on the calling thread
     * @return the running node; {@link #close} it
     * @throws NetworkException if the transport cannot start (e.g. its port is taken); a failed
     *     start leaves no thread and no port behind
     * @throws IllegalArgumentException if the configuration is invalid (the message names the key)
     * @throws RuntimeException whatever {@code beforeReceiving} threw (an {@link Error} as well):
     *     the node was closed, no thread and no port are left behind
     */
    public static DXNet start(DXNetConfig config, Consumer<? super DXNet> beforeReceiving) throws NetworkException {
        java.util.Objects.requireNonNull(beforeReceiving, "beforeReceiving");
        DXNet node = new DXNet(config);
        try {
            beforeReceiving.accept(node);
        } catch (RuntimeException | Error e) {
            try {
                node.close();
            } catch (RuntimeException | Error closing) {
                e.addSuppressed(closing);
            }
            throw e;
        }
        if (node.running) { // unless beforeReceiving closed it
            node.incoming.start();
        }
        return node;
    }

    /**
     * Starts a node from a JSON or key=value configuration file (see {@link DXNetConfig#load}).
     *
     * @param configFile the configuration file
     * @return the running node; {@link #close} it
     * @throws NetworkException if the transport cannot start
     * @throws java.io.IOException if the file cannot be read
     * @throws IllegalArgumentException if the configuration is invalid (the message names the file and key)
     */
    public static DXNet start(java.nio.file.Path configFile) throws NetworkException, java.io.IOException {
        return start(DXNetConfig.load(configFile));
    }

    /**
     * {@link #start(DXNetConfig, Consumer)} from a JSON or key=value configuration file.
     *
     * @param configFile the configuration file
     * @param beforeReceiving registers the node's message types and receivers
     * @return the running node; {@link #close} it
     * @throws NetworkException if the transport cannot start
     * @throws java.io.IOException if the file cannot be read
     * @throws IllegalArgumentException if the configuration is invalid (the message names the file and key)
     */
    public static DXNet start(java.nio.file.Path configFile, Consumer<? super DXNet> beforeReceiving)
            throws NetworkException, java.io.IOException {
        return start(DXNetConfig.load(configFile), beforeReceiving);
    }

    /**
     * Starts node {@code nodeId} from a configuration file that all nodes may
     * share (see {@link DXNetConfig#load(java.nio.file.Path, int)}).
     *
     * @param configFile the configuration file
     * @param nodeId this node's id (overrides one the file gives)
     * @return the running node; {@link #close} it
     * @throws NetworkException if the transport cannot start
     * @throws java.io.IOException if the file cannot be read
     * @throws IllegalArgumentException if the configuration is invalid (the message names the file and key)
     */
    public static DXNet start(java.nio.file.Path configFile, int nodeId) throws NetworkException, java.io.IOException {
        return start(DXNetConfig.load(configFile, nodeId));
    }

    /**
     * {@link #start(DXNetConfig, Consumer)} for node {@code nodeId} from a
     * configuration file that all nodes may share.
     *
     * @param configFile the configuration file
     * @param nodeId this node's id (overrides one the file gives)
     * @param beforeReceiving registers the node's message types and receivers
     * @return the running node; {@link #close} it
     * @throws NetworkException if the transport cannot start
     * @throws java.io.IOException if the file cannot be read
     * @throws IllegalArgumentException if the configuration is invalid (the message names the file and key)
     */
    public static DXNet start(java.nio.file.Path configFile, int nodeId, Consumer<? super DXNet> beforeReceiving)
            throws NetworkException, java.io.IOException {
        return start(DXNetConfig.load(configFile, nodeId), beforeReceiving);
    }

    /**
     * This node's id.
     *
     * @return the id configured as {@code nodeId}
     */
    public int nodeId() {
        return config.nodeId;
    }

    /**
     * The port this node listens on (for other nodes' tables): on ib the UDP
     * port of its connection manager, on nio its TCP port.
     *
     * @return the port
     */
    public int localPort() {
        return transport.localPort();
    }

    /**
     * Adds a node to the node table ("host:port").
     *
     * @param id the node's id
     * @param hostPort where it listens, {@code host:port}
     * @throws IllegalArgumentException if {@code id} is not a node id
     *     (0..65534) or is this node's own, or {@code hostPort} is not host:port
     */
    public void addNode(int id, String hostPort) {
        if (!io.ibdxnet.transport.NodeId.isValid(id)) {
            throw new IllegalArgumentException("node id " + id + " is not in [" + io.ibdxnet.transport.NodeId.MIN + ", "
                    + io.ibdxnet.transport.NodeId.MAX + "]");
        }
        if (id == config.nodeId) {
            throw new IllegalArgumentException("node id " + id + " is this node's own id");
        }
        String error = hostPort == null ? "is missing" : ConfigKey.addressError(hostPort);
        if (error != null) {
            throw new IllegalArgumentException("node " + id + ": address '" + hostPort + "' " + error);
        }
        int colon = hostPort.lastIndexOf(':');
        transport.addNode(id, hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
    }

    /**
     * Makes {@code type/subtype} known: received messages of it are created as {@code c}.
     *
     * @param type the type byte
     * @param subtype the subtype byte
     * @param c the message class; it needs a no-argument constructor
     */
    public void registerMessageType(byte type, byte subtype, Class<? extends Message> c) {
        types.define(type, subtype, c);
    }

    /**
     * Makes {@code type} known: received messages of it are created as {@code c}.
     *
     * @param type the message type
     * @param c the message class; it needs a no-argument constructor
     */
    public void registerMessageType(MessageType type, Class<? extends Message> c) {
        registerMessageType(type.type(), type.subtype(), c);
    }

    /**
     * Delivers messages of {@code type/subtype} to {@code receiver} on handler
     * threads, in order per source node (see the class comment, "Order").
     * The class of the messages must be registered as well
     * ({@link #registerMessageType(byte, byte, Class)}).
     *
     * @param type the type byte
     * @param subtype the subtype byte
     * @param receiver what handles them
     */
    public void register(byte type, byte subtype, MessageReceiver receiver) {
        types.handleWith(type, subtype, receiver::onIncomingMessage);
    }

    /**
     * {@link #register(byte, byte, MessageReceiver)} with a {@link MessageType}.
     *
     * @param type the message type
     * @param receiver what handles them
     */
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
     *
     * @param <M> the message class
     * @param c the message class; it needs a no-argument constructor, which gives the type
     * @param handler what handles them
     */
    public <M extends Message> void register(Class<M> c, MessageHandler<? super M> handler) {
        register(MessageTypes.probe(c).getMessageType(), c, handler);
    }

    /**
     * Registers message class {@code c} under {@code type} and delivers its
     * messages to {@code handler}, typed (as {@link #register(Class, MessageHandler)}).
     *
     * @param <M> the message class
     * @param type the message type
     * @param c the message class; it needs a no-argument constructor
     * @param handler what handles them
     */
    @SuppressWarnings("unchecked")
    public <M extends Message> void register(MessageType type, Class<M> c, MessageHandler<? super M> handler) {
        registerMessageType(type, c);
        // Safe: the key creates instances of c only (registerMessageType refuses another class).
        types.handleWith(type.type(), type.subtype(), (MessageHandler<Message>) (MessageHandler<?>) handler);
    }

    /**
     * Sends {@code message} to its destination; waits for a connection and
     * ring and flow-control room up to {@code sendTimeoutMs}
     * ({@code handlerSendTimeoutMs} on a handler thread). From a handler
     * running on the transport's receiving thread
     * ({@link DXNetConfig#handleOnReceivingThread}) it never waits: what
     * cannot go out at once is queued and sent in order by another thread
     * (a failure then is logged, not thrown).
     *
     * @param message the message, addressed ({@link Message#setDestination})
     * @throws NetworkException if it cannot be sent: its {@link NetworkException#reason() reason}
     *         says why (e.g. {@link FailureReason#TIMEOUT}, {@link FailureReason#UNREACHABLE},
     *         {@link FailureReason#TOO_LARGE} beyond {@code maxMessageSize}, {@link FailureReason#CLOSED})
     * @throws IllegalArgumentException if it has no valid destination
     */
    public void sendMessage(Message message) throws NetworkException {
        send(message, 0, 0, sender.sendDeadline());
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
     * out) its request times out. From a handler running on the transport's
     * receiving thread ({@link DXNetConfig#handleOnReceivingThread}) a reply
     * that cannot go out at once is queued and sent in order by another
     * thread (true is returned; a failure then is logged and counted).
     *
     * @param <R> the response class the request declares
     * @param request the request being answered
     * @param response the answer
     * @return whether the reply was sent
     */
    public <R extends Response> boolean reply(Request<R> request, R response) {
        response.answer(request);
        try {
            send(response, 0, 0, sender.sendDeadline());
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

    /**
     * Sends {@code request} and waits for its response, at most
     * {@code timeoutMs} from the call: one deadline for connecting, waiting
     * for ring and flow-control room (never longer than {@code sendTimeoutMs}
     * either) and the answer. A send that cannot finish in time throws
     * {@link NetworkException} (a connection not set up in time says so);
     * no answer in time, {@link RequestTimeoutException}. A handler that
     * threw on the remote node ends the wait with {@link RemoteHandlerException}.
     *
     * @param <R> the response class the request declares
     * @param request the request, addressed
     * @param timeoutMs the deadline from this call, in milliseconds (more than 0)
     * @return the response
     * @throws RequestTimeoutException if no answer came in time
     * @throws RemoteHandlerException if the remote handler threw ({@link NoReceiverException}: nobody handles the type there)
     * @throws NetworkException if the request could not be sent in time, or the connection failed
     * @throws IllegalStateException if called from a handler running on the transport's receiving thread
     *     ({@link DXNetConfig#handleOnReceivingThread}): the response would arrive through the waiting thread
     */
    public <R extends Response> R sendSync(Request<R> request, int timeoutMs) throws NetworkException {
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
        IdleStrategy.until(f::isDone); // a parked requester costs its response a wake-up
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

    /**
     * {@link #sendSync(Request, int)} with the configured {@code requestTimeoutMs}.
     *
     * @param <R> the response class the request declares
     * @param request the request, addressed
     * @return the response
     * @throws NetworkException as {@link #sendSync(Request, int)}
     * @throws IllegalStateException as {@link #sendSync(Request, int)}
     */
    public <R extends Response> R sendSync(Request<R> request) throws NetworkException {
        return sendSync(request, config.requestTimeoutMs);
    }

    /**
     * {@link #sendAsync(Request, int)} with the configured
     * {@code requestTimeoutMs}.
     *
     * @param <R> the response class the request declares
     * @param request the request, addressed
     * @return the response's future
     * @throws NetworkException never (see {@link #sendAsync(Request, int)})
     */
    public <R extends Response> CompletableFuture<R> sendAsync(Request<R> request) throws NetworkException {
        return sendAsync(request, config.requestTimeoutMs);
    }

    /**
     * Sends {@code request} without blocking: returns at once. The future
     * completes with the response, or exceptionally: {@link RequestTimeoutException}
     * when no answer came within {@code timeoutMs} of this call,
     * {@link RemoteHandlerException}, or {@link NetworkException} (no
     * connection in time, ring or window full until the deadline — never
     * later than {@code sendTimeoutMs} — the connection failed, the node is
     * closed, or the peer answered with another class than the request
     * declared). A request that cannot be sent at once (no connection yet,
     * ring or window full, or earlier deferred sends to the node ahead of it)
     * is queued behind those and sent by a pool thread, in order (see
     * {@link DeferredSends}); at most {@code maxDeferredBytesPerNode} of them
     * wait per destination, beyond that the future fails at once
     * ({@link FailureReason#OVERLOADED}). Every failure arrives through the future, as a
     * {@link NetworkException} whose {@link NetworkException#reason() reason}
     * says why (a message beyond {@code maxMessageSize}:
     * {@link FailureReason#TOO_LARGE}); only arguments wrong in themselves (a
     * timeout of 0 or less, an invalid destination) throw
     * {@link IllegalArgumentException}. No {@link NetworkException} is thrown
     * (the {@code throws} clause stays for source compatibility). A caller
     * that stops waiting earlier leaves nothing behind: the entry goes at the
     * timeout.
     *
     * @param <R> the response class the request declares
     * @param request the request, addressed
     * @param timeoutMs the deadline from this call, in milliseconds (more than 0)
     * @return the response's future
     * @throws NetworkException never (kept for source compatibility)
     */
    @SuppressWarnings("unchecked")
    public <R extends Response> CompletableFuture<R> sendAsync(Request<R> request, int timeoutMs) throws NetworkException {
        if (timeoutMs <= 0) {
            throw new IllegalArgumentException("request timeout must be positive: " + timeoutMs);
        }
        long now = System.nanoTime();
        PendingRequests.Pending p = requests.open(request.getDestination(), timeoutMs, ResponseTypes.expected(request));
        request.requestId = p.requestId;
        try {
            if (!running) {
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
     * Requests waiting for a response (each leaves at its response, failure or timeout).
     *
     * @return their number
     */
    public int pendingRequests() {
        return requests.size();
    }

    /**
     * A synchronous send: behind what was deferred to the node before it
     * (order per thread), then inline; waits until {@code sendBy} at most.
     */
    private void send(Message m, int kindFlags, int requestId, long sendBy) throws NetworkException {
        if (!running) {
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
    private void sendDeferred(DeferredMessage d) throws NetworkException {
        if (d.sentInline == 0 && d.request != null && d.request.future.isDone()) {
            return; // timed out (or failed) while queued: not sent at all
        }
        if (!running) {
            throw new NetworkException(FailureReason.CLOSED, "DXNet is closed");
        }
        if (d.sentInline == 0 && System.nanoTime() - d.sendBy > 0) {
            throw new NetworkException(FailureReason.TIMEOUT, (d.request != null ? "request" : "message") + " to node "
                    + d.dest + " not sent within its deadline (it waited behind earlier sends to that node)");
        }
        // A handler may wait behind this send (its reply queued after it): the
        // wait breaks the same cycle as a handler's own (IncomingPath.confirmHeld).
        java.util.function.IntConsumer outer = io.ibdxnet.transport.FlowWindow.BEFORE_HANDLER_WAITS.get();
        io.ibdxnet.transport.FlowWindow.BEFORE_HANDLER_WAITS.set(incoming.beforeWindowWait());
        try {
            sender.sendDeferred(d);
        } finally {
            io.ibdxnet.transport.FlowWindow.BEFORE_HANDLER_WAITS.set(outer);
        }
    }

    /** Pool thread: a deferred request that could not be sent fails through its future. */
    private void deferredEnded(DeferredMessage d, Throwable failure) {
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
    private void answerWithError(Request<?> r, Throwable e) {
        try {
            send(new ErrorResponse(r, e), 0, 0, sender.sendDeadline());
        } catch (RuntimeException x) {
            warnings.caused(Level.WARNING, "error reply not sent", r.getSource(), "node " + config.nodeId
                    + ": could not tell node " + r.getSource() + " that its request " + r.requestId + " failed", x);
        }
    }

    /** A thread of the core died: reported, never silent. */
    private void failed(Thread t, Throwable e) {
        failure = e;
        LOG.log(Level.SEVERE, "node " + config.nodeId + ": thread " + t.getName() + " died; this node no longer receives", e);
    }

    /**
     * Tells {@code source} that {@code messages} plain messages of it
     * ({@code bytes} of payload) were dropped here ({@link DropNotices}; the
     * receive path or the timer thread): queued for the deferred-send pool,
     * never waited for. The own node hears it at once.
     */
    private void tellDropped(int source, long messages, long bytes, String causes) {
        if (!running) {
            return;
        }
        if (source == config.nodeId) {
            dropReported(source, messages, bytes, causes);
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

    /** {@code node} dropped plain messages of ours: a possible loss, for the listener or the log. */
    private void dropReported(int node, long messages, long bytes, String causes) {
        counters.dropNoticesReceived.incrementAndGet();
        possiblyLost(node, Math.max(-1, bytes), "node " + node + " dropped " + messages + " message"
                + (messages == 1 ? "" : "s") + " (" + bytes + " payload bytes) it could not hand to a receiver: " + causes,
                false);
    }

    /** A transport reports unconfirmed bytes of a failed connection: the listener hears it, or the log. */
    private void possiblyLost(int node, long bytes, String reason) {
        possiblyLost(node, bytes, reason, true);
    }

    /** The listener hears of a possible loss, or the log ({@code unconfirmed}: the bytes were not confirmed). */
    private void possiblyLost(int node, long bytes, String reason, boolean unconfirmed) {
        counters.possibleLosses.incrementAndGet();
        LossListener l = lossListener;
        if (l != null) {
            try {
                l.possiblyLost(node, bytes, reason);
                return;
            } catch (RuntimeException e) {
                warnings.log(Level.WARNING, "loss listener failed", node, "node " + config.nodeId
                        + ": the loss listener failed for node " + node, e);
            }
        }
        warnings.warn("possible loss", node, "node " + config.nodeId + ": messages sent to node " + node + " may be lost ("
                + (bytes < 0 || !unconfirmed ? "" : bytes + " bytes unconfirmed, ") + reason + ")");
    }

    /**
     * Messages dropped (unknown type, no receiver, late response, bad payload).
     * The source of a plain message dropped for its type or payload is told
     * (its {@link LossListener}).
     *
     * @return their number since the start
     */
    public long droppedMessages() {
        return counters.dropped.get();
    }

    /**
     * What this node holds for a slow consumer: received buffers waiting for
     * the message creation coordinator (bounded by {@code ibqMaxBuffers}, and
     * {@code ibqMaxBuffersPerSource} per source; on ib a source's buffers
     * beyond its share are kept too, copied out: {@code ibq_spilled_bytes})…
     *
     * @return the number of buffers
     */
    public int incomingBuffersQueued() {
        return ibq.size();
    }

    /**
     * …their bytes (bounded by {@code ibqMaxBytes}, or one buffer when it alone is larger)…
     *
     * @return the bytes
     */
    public long incomingBytesQueued() {
        return ibq.bytes();
    }

    /**
     * …on ib also the bytes of sources beyond their share, kept outside those
     * bounds (copied out of the receive buffers past
     * {@code ibqMaxBuffersPerSource}); unconfirmed, so at most each sender's
     * flow-control window…
     *
     * @return the bytes
     */
    public long incomingBytesBeyondShare() {
        return ibq.bytesBeyondShare();
    }

    /**
     * …message batches not yet handled (bounded by {@code handlerQueueSize})…
     *
     * @return the number of batches
     */
    public int handlerBatchesQueued() {
        return handlers.queued();
    }

    /**
     * …and their bytes (payload plus 64 per message; bounded by
     * {@code handlerQueueBytes}, {@code handlerQueueBytesPerSource} per source,
     * each source beyond by at most one buffer's messages).
     *
     * @return the bytes
     */
    public long handlerBytesQueued() {
        return handlers.queuedBytes();
    }

    /**
     * The largest frame the transport carries; larger messages are sent in frames of this size.
     *
     * @return the size in bytes, frame header included
     */
    public int maxFrameSize() {
        return transport.maxFrameSize();
    }

    /**
     * The device the transport runs on (e.g. {@code rxe0}, {@code sim2}).
     *
     * @return its name
     */
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
     * {@code confirmed_before_handled} (received buffers confirmed to their
     * sender before their handlers returned, because a handler here, or a
     * send one waits behind, waited for that sender's window: a loss of them
     * is not reported), {@code replies_failed} ({@link #reply} could not send),
     * {@code possible_losses} (connections that failed with data unconfirmed,
     * and notices of peers that dropped plain messages of ours: see {@link LossListener}),
     * {@code drop_notices_sent} and {@code drop_notices_received} (those notices),
     * {@code unfinished_bytes_claimed}, {@code messages_copied} (messages to
     * other nodes serialised into a buffer and copied into the send ring: no
     * {@link Message#payloadSize}, or larger than one frame, or an async
     * request queued because it could not go out at once, or a drop notice; the others are
     * serialised in place), {@code in_place_aborted} (in-place serialisations
     * that failed, sent as frames the receiver skips), {@code messages_received_copied}
     * (received messages assembled from several frames or receive buffers
     * into a heap array; the others are imported where they lie in the
     * receive buffer), {@code buffers_received_inline}
     * (received buffers the transport's own thread turned into messages, see
     * {@code receiveInline}), {@code batches_handled_on_receiving_thread}
     * (received batches whose handlers that thread ran itself, see
     * {@code handleOnReceivingThread}), {@code receiving_thread_sends_deferred}
     * (sends of such handlers that could not go out at once and were deferred),
     * {@code ibq_spilled_buffers} and
     * {@code ibq_spilled_bytes} (received buffers copied out so that their
     * receive buffers went back at once: a held source's beyond its first, and
     * on ib a source's beyond its share),
     * {@code ibq_bytes_beyond_share} (the gauge of {@link #incomingBytesBeyondShare}).
     *
     * @return counter name to value, a snapshot
     */
    public Map<String, Long> transportStats() {
        Map<String, Long> m = new java.util.LinkedHashMap<>(transport.stats());
        addCoreCounters(m);
        return m;
    }

    /**
     * The core's counters alone (MBean {@code io.ibdxnet:type=Node,node=<id>}):
     * those of {@link #transportStats} that are not the transport's, with
     * {@code protocol_violations} the core's own, and {@code messages_dropped}
     * ({@link #droppedMessages}), {@code pending_requests} and the gauges of
     * what this node holds for a slow consumer.
     */
    private Map<String, Long> coreStats() {
        Map<String, Long> m = new java.util.LinkedHashMap<>();
        m.put("messages_dropped", counters.dropped.get());
        addCoreCounters(m);
        m.put("pending_requests", (long) pendingRequests());
        m.put("incoming_buffers_queued", (long) ibq.size());
        m.put("incoming_bytes_queued", ibq.bytes());
        m.put("handler_batches_queued", (long) handlers.queued());
        m.put("handler_bytes_queued", handlers.queuedBytes());
        return m;
    }

    private void addCoreCounters(Map<String, Long> m) {
        counters.addTo(m);
        sender.addTo(m);
        m.put("unfinished_bytes_claimed", incoming.unfinishedBytesClaimed());
        m.put("buffers_received_inline", incoming.inlineBuffers());
        m.put("batches_handled_on_receiving_thread", incoming.handledOnReceivingThread());
        m.put("ibq_spilled_buffers", ibq.spilledBuffers());
        m.put("ibq_spilled_bytes", ibq.spilledBytes());
        m.put("ibq_bytes_beyond_share", ibq.bytesBeyondShare());
    }

    /**
     * Told when a connection failed while messages whose {@code sendMessage}
     * had returned were not yet confirmed by the receiver: they may be lost.
     * Also told when a receiver dropped plain messages of this node (not
     * requests, which fail with {@link NoReceiverException}) because it could
     * not hand them to anyone: no receiver for their type, their type not
     * registered there, or no message could be created from their payload.
     * Such a receiver sends a notice per source at most every 100 ms, with the
     * messages and payload bytes dropped since its last one; the reason names
     * the node and the types. Without a listener this is logged (at most once
     * a second per node). Counted in {@code possible_losses}.
     */
    public interface LossListener {
        /**
         * {@code bytes} to {@code node} may not have arrived, or were dropped there.
         *
         * @param node the peer
         * @param bytes how many ({@code -1}: unknown); for messages a receiver dropped, their payload bytes
         * @param reason why the connection failed, or which node dropped how many messages of which types, and why
         */
        void possiblyLost(int node, long bytes, String reason);
    }

    /**
     * Sets the {@link LossListener}; it runs on a transport thread and must not block.
     *
     * @param listener the listener, or null to log instead
     */
    public void setLossListener(LossListener listener) {
        this.lossListener = listener;
    }

    /**
     * Whether a connection this node sends to {@code node} on is open: a send
     * to it needs no connection set-up. False for a node that only sent to
     * us so far, and once the connection failed or was closed (also by the
     * least-recently-used eviction beyond {@code maxConnections}).
     *
     * @param node a node id
     * @return whether the connection to {@code node} is open
     */
    public boolean isConnected(int node) {
        return running && transport.isConnected(node);
    }

    /** Hears of connections as they open and fail ({@link #setConnectionListener}). */
    public interface ConnectionListener {
        /**
         * A connection this node sends to {@code node} on was established.
         *
         * @param node the peer
         */
        void connected(int node);

        /**
         * The connection to or from {@code node} failed, or the node left;
         * requests waiting for its answers failed with
         * {@link FailureReason#DISCONNECTED}.
         *
         * @param node the peer
         */
        void disconnected(int node);
    }

    /**
     * Sets the {@link ConnectionListener} (null: none). It runs on a transport
     * thread or on the sending thread that set the connection up, and must
     * not block; an exception it throws is logged.
     *
     * @param listener the listener, or null
     */
    public void setConnectionListener(ConnectionListener listener) {
        this.connectionListener = listener;
    }

    private void connectionEvent(int node, boolean connected) {
        ConnectionListener l = connectionListener;
        if (l == null) {
            return;
        }
        try {
            if (connected) {
                l.connected(node);
            } else {
                l.disconnected(node);
            }
        } catch (RuntimeException e) {
            warnings.log(Level.WARNING, "connection listener failed", node, "node " + config.nodeId
                    + ": the connection listener failed for node " + node, e);
        }
    }

    /**
     * Whether every thread of the core runs; see {@link #failure}.
     *
     * @return true while they do
     */
    public boolean healthy() {
        return failure == null && incoming.alive() == (running && incoming.receiving());
    }

    /**
     * What killed a thread of the core (the node no longer receives).
     *
     * @return the throwable, or null
     */
    public Throwable failure() {
        return failure;
    }

    /**
     * Closes the node; a second call returns at once. It stops receiving,
     * gives the message creation coordinator up to 5 s to hand on what was
     * received, and lets the handlers finish what they were handed (up to
     * {@code requestTimeoutMs}); then the peers are told exactly what was
     * handled, so their unconfirmed messages are not reported lost. Called
     * from one of this node's own handlers it does not wait for the handlers
     * (it would wait for itself) and closes without that count. Requests
     * still waiting fail with a {@link NetworkException}, async requests not
     * yet sent included; the handler threads end. Called from a handler
     * running on the transport's receiving thread
     * ({@link DXNetConfig#handleOnReceivingThread}) it returns at once and
     * another thread closes the node (closing the transport waits for that
     * thread).
     */
    @Override
    public void close() {
        if (!running) {
            return;
        }
        if (HandlerDispatch.onReceivingThread()) {
            // A handler on the transport's receiving thread: closing the transport
            // waits for that thread to end. Another thread closes; this returns at once.
            Thread closer = new Thread(this::close, "dxnet-close-" + config.nodeId);
            closer.setDaemon(true);
            closer.start();
            return;
        }
        running = false;
        boolean exact = incoming.stop(5_000);
        // Let the handlers finish what the coordinator handed them (up to the
        // request timeout): then the peers can be told exactly what was handled.
        // Not from one of our own handlers: it would wait for itself (and for
        // the tasks queued behind it); the node then closes without that count.
        boolean fromOwnHandler = handlers.isOwnThread();
        try {
            exact = exact && !fromOwnHandler && handlers.awaitIdle(config.requestTimeoutMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            exact = false;
        }
        // What the handlers sent (an answer, say) leaves before the peers hear we went.
        try {
            transport.awaitSent(SEND_ON_CLOSE_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (exact) {
            transport.closeAfterHandlingEverythingConsumed();
        } else {
            transport.close();
        }
        handlers.shutdown();
        requests.close();
        metrics.close();
    }
}
