package io.ibdxnet;

import io.ibdxnet.internal.DeferredSends;
import io.ibdxnet.internal.MessageTypes;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.logging.Logger;

/**
 * A node: register message types and receivers, send messages, send
 * requests and wait for responses; messages to the own node are delivered
 * locally. Its threads, the order in which messages are handled and what a
 * deadline covers are in the package overview ({@code package-info}).
 */
public final class DXNet implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(DXNet.class.getName());

    /** The node's parts and their machinery; this class is their public face. */
    private final NodeCore core;

    private DXNet(DXNetConfig config) throws NetworkException {
        this.core = new NodeCore(config, LOG);
    }

    /**
     * Starts a node. It is reachable once its transport runs, before this
     * returns, so a message that arrives before its receiver is registered is
     * dropped (its sender's {@link LossListener} hears of it). Where peers may
     * already be sending, use {@link #start(DXNetConfig, Consumer)}.
     *
     * @param config the node's configuration (checked here; not to be changed afterwards)
     * @return the running node; {@link #close} it
     * @throws NetworkException if the transport cannot start (e.g. its port is taken); nothing is left behind
     * @throws IllegalArgumentException if the configuration is invalid (the message names the key)
     */
    public static DXNet start(DXNetConfig config) throws NetworkException {
        return start(config, node -> {});
    }

    /**
     * Starts a node and runs {@code beforeReceiving} on it before anything it
     * receives is handled: the way to start when peers may already be sending
     * (a node restarting into a running cluster). The transport runs first
     * (the node has its port; {@link #addNode} works); {@code beforeReceiving}
     * registers the types and receivers; only then is received data turned
     * into messages. What arrives meanwhile waits, unconfirmed, in the
     * incoming buffer queue (beyond {@code ibqMaxBuffers} and
     * {@code ibqMaxBytes} flow control holds the senders back), so keep it
     * short; responses wait too (a {@link #sendSync} in it times out).
     *
     * @param config the node's configuration (checked here; not to be changed afterwards)
     * @param beforeReceiving registers the node's message types and receivers; runs on the calling thread
     * @return the running node; {@link #close} it
     * @throws NetworkException if the transport cannot start (e.g. its port is taken); nothing is left behind
     * @throws IllegalArgumentException if the configuration is invalid (the message names the key)
     * @throws RuntimeException what {@code beforeReceiving} threw (an {@link Error} too), after closing the node
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
        node.core.startReceiving();
        return node;
    }

    /**
     * {@link #start(DXNetConfig)} from a JSON or key=value file ({@link DXNetConfig#load}).
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
     * {@link #start(DXNetConfig, Consumer)} from a JSON or key=value file.
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
     * {@link #start(DXNetConfig)} of node {@code nodeId} from a file all nodes
     * may share ({@link DXNetConfig#load(java.nio.file.Path, int)}).
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
     * {@link #start(DXNetConfig, Consumer)} of node {@code nodeId} from a file all nodes may share.
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

    /** {@return this node's id, configured as {@code nodeId}} */
    public int nodeId() {
        return core.config.nodeId;
    }

    /**
     * {@return the port this node listens on (for other nodes' tables): on ib its connection
     * manager's UDP port, on nio its TCP port}
     */
    public int localPort() {
        return core.transport.localPort();
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
        core.addNode(id, hostPort);
    }

    /**
     * Makes {@code type/subtype} known: received messages of it are created as {@code c}.
     *
     * @param type the type byte
     * @param subtype the subtype byte
     * @param c the message class; it needs a no-argument constructor
     */
    public void registerMessageType(byte type, byte subtype, Class<? extends Message> c) {
        core.types.define(type, subtype, c);
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
     * threads, in order per source node (see the package overview, "Order").
     * The class of the messages must be registered as well
     * ({@link #registerMessageType(byte, byte, Class)}).
     *
     * @param type the type byte
     * @param subtype the subtype byte
     * @param receiver what handles them
     */
    public void register(byte type, byte subtype, MessageReceiver receiver) {
        core.types.handleWith(type, subtype, receiver::onIncomingMessage);
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
     * Runs on handler threads, in order per source node (see the package
     * overview, "Order"); a handler that throws answers a request with a
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
        core.types.handleWith(type.type(), type.subtype(), (MessageHandler<Message>) (MessageHandler<?>) handler);
    }

    /**
     * Sends {@code message} to its destination; waits for a connection and
     * ring and flow-control room up to {@code sendTimeoutMs}
     * ({@code handlerSendTimeoutMs} on a handler thread; from a handler on the
     * transport's receiving thread it never waits: what cannot go out at once
     * is queued and sent in order by another thread, a failure then logged).
     *
     * @param message the message, addressed ({@link Message#setDestination})
     * @throws NetworkException if it cannot be sent; its {@link NetworkException#reason() reason} says why
     *         (e.g. {@link FailureReason#TIMEOUT}, {@link FailureReason#UNREACHABLE},
     *         {@link FailureReason#TOO_LARGE} beyond {@code maxMessageSize}, {@link FailureReason#CLOSED})
     * @throws IllegalArgumentException if it has no valid destination
     */
    public void sendMessage(Message message) throws NetworkException {
        core.sends.sendMessage(message);
    }

    /**
     * Sends {@code response} as the answer to {@code request} (addressed to
     * the request's source here). Throws no checked exception: a reply that
     * cannot be sent is logged (at most once a second per node), counted
     * ({@code replies_failed}), and the requester learns of it: its request
     * fails with a {@link NetworkException} when the connection failed, with a
     * {@link RemoteHandlerException} naming the problem when the reply is
     * invalid (e.g. beyond {@code maxMessageSize}), else (the send timed out)
     * by its timeout. From a handler on the transport's receiving thread a
     * reply that cannot go out at once is queued (true is returned).
     *
     * @param <R> the response class the request declares
     * @param request the request being answered
     * @param response the answer
     * @return whether the reply was sent (or queued)
     */
    public <R extends Response> boolean reply(Request<R> request, R response) {
        return core.sends.reply(request, response);
    }

    /**
     * Sends {@code request} and waits for its response, at most
     * {@code timeoutMs} from the call: one deadline for connecting, ring and
     * flow-control room (never longer than {@code sendTimeoutMs} either) and
     * the answer.
     *
     * @param <R> the response class the request declares
     * @param request the request, addressed
     * @param timeoutMs the deadline from this call, in milliseconds (more than 0)
     * @return the response
     * @throws RequestTimeoutException if no answer came in time
     * @throws RemoteHandlerException if the remote handler threw ({@link NoReceiverException}: nobody handles the type there)
     * @throws NetworkException if the request could not be sent in time (a connection not set up in time says so),
     *     or the connection failed
     * @throws IllegalStateException if called from a handler running on the transport's receiving thread
     *     ({@link DXNetConfig#handleOnReceivingThread}): the response would arrive through the waiting thread
     */
    public <R extends Response> R sendSync(Request<R> request, int timeoutMs) throws NetworkException {
        return core.sends.sendSync(request, timeoutMs);
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
        return sendSync(request, core.config.requestTimeoutMs);
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
        return sendAsync(request, core.config.requestTimeoutMs);
    }

    /**
     * Sends {@code request} without blocking. The future completes with the
     * response, or with a {@link RequestTimeoutException} (no answer within
     * {@code timeoutMs} of this call), a {@link RemoteHandlerException}, or a
     * {@link NetworkException} whose {@link NetworkException#reason() reason}
     * says why: no connection in time, ring or window full until the deadline
     * (never later than {@code sendTimeoutMs}), the connection failed, the
     * node closed, an answer of another class than declared,
     * {@link FailureReason#TOO_LARGE}. A request that cannot go out at once is
     * queued behind earlier ones to its node and sent by a pool thread, in
     * order ({@link DeferredSends}); beyond {@code maxDeferredBytesPerNode}
     * queued per node the future fails at once ({@link FailureReason#OVERLOADED}).
     * A caller that stops waiting leaves nothing behind (the entry goes at the timeout).
     *
     * @param <R> the response class the request declares
     * @param request the request, addressed
     * @param timeoutMs the deadline from this call, in milliseconds (more than 0)
     * @return the response's future
     * @throws NetworkException never: every failure arrives through the future (kept for source compatibility)
     * @throws IllegalArgumentException if {@code timeoutMs} is not positive or the destination is invalid
     */
    public <R extends Response> CompletableFuture<R> sendAsync(Request<R> request, int timeoutMs) throws NetworkException {
        return core.sends.sendAsync(request, timeoutMs);
    }

    /** {@return the number of requests waiting for a response (each leaves at its response, failure or timeout)} */
    public int pendingRequests() {
        return core.requests.size();
    }

    /**
     * {@return the messages dropped since the start (unknown type, no receiver, late response, bad
     * payload); a plain message's source hears of each (its {@link LossListener})}
     */
    public long droppedMessages() {
        return core.counters.dropped.get();
    }

    /**
     * {@return the received buffers waiting for the message creation coordinator (bounded by
     * {@code ibqMaxBuffers}, {@code ibqMaxBuffersPerSource} per source)}
     */
    public int incomingBuffersQueued() {
        return core.ibq.size();
    }

    /** {@return the bytes of {@link #incomingBuffersQueued} (bounded by {@code ibqMaxBytes}, or one larger buffer)} */
    public long incomingBytesQueued() {
        return core.ibq.bytes();
    }

    /**
     * {@return on ib, the received bytes of sources beyond their share, copied out of the receive
     * buffers outside those bounds (unconfirmed: at most each sender's flow-control window)}
     */
    public long incomingBytesBeyondShare() {
        return core.ibq.bytesBeyondShare();
    }

    /** {@return the message batches not yet handled (bounded by {@code handlerQueueSize})} */
    public int handlerBatchesQueued() {
        return core.handlers.queued();
    }

    /**
     * {@return the bytes of {@link #handlerBatchesQueued}: payload plus 64 per message (bounded by {@code
     * handlerQueueBytes}, {@code handlerQueueBytesPerSource} per source, a source beyond by at most one buffer's)}
     */
    public long handlerBytesQueued() {
        return core.handlers.queuedBytes();
    }

    /** {@return the largest frame the transport carries, header included: larger messages go in such frames} */
    public int maxFrameSize() {
        return core.transport.maxFrameSize();
    }

    /** {@return the name of the device the transport runs on (e.g. {@code rxe0}, {@code sim2})} */
    public String fabricName() {
        return core.transport.name();
    }

    /**
     * {@return a snapshot of the transport's counters and gauges with the core's, by name}
     * Every key and its meaning is in docs/operations.md, "Java counters" (defined once in
     * {@code io.ibdxnet.internal.StatsKeys}); on ib the native engine's too, "Engine statistics".
     */
    public Map<String, Long> transportStats() {
        Map<String, Long> m = new java.util.LinkedHashMap<>(core.transport.stats());
        core.stats.addCoreCounters(m);
        return m;
    }

    /**
     * Told when a connection failed while messages whose {@code sendMessage}
     * returned were not yet confirmed by the receiver (they may be lost), and
     * when a receiver dropped plain messages of this node (requests fail with
     * {@link NoReceiverException} instead): no receiver or no registered type
     * there, or no message could be created from the payload. Such a receiver
     * tells each source at most every 100 ms what it dropped since. Without a
     * listener this is logged (at most once a second per node). Counted in
     * {@code possible_losses}.
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
        core.losses.lossListener = listener == null ? null : listener::possiblyLost;
    }

    /**
     * Whether the connection this node sends to {@code node} on is open (a
     * send needs no set-up): false for a node that only sent to us, and once
     * the connection failed or was closed (also by eviction beyond {@code maxConnections}).
     *
     * @param node a node id
     * @return whether it is open
     */
    public boolean isConnected(int node) {
        return core.running() && core.transport.isConnected(node);
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
        core.losses.connectionListener = listener == null ? null : (node, connected) -> {
            if (connected) {
                listener.connected(node);
            } else {
                listener.disconnected(node);
            }
        };
    }

    /** {@return whether every thread of the core runs (see {@link #failure})} */
    public boolean healthy() {
        return core.healthy();
    }

    /** {@return what killed a thread of the core (the node no longer receives), or null} */
    public Throwable failure() {
        return core.failure();
    }

    /**
     * Closes the node; a second call returns at once. It stops receiving, gives
     * the message creation coordinator up to 5 s to hand on what was received
     * and the handlers up to {@code requestTimeoutMs} to finish it; then the
     * peers are told what was handled, so their unconfirmed messages are not
     * reported lost. Handlers still running then are not interrupted: a
     * warning names how many, and their threads end when they return. From
     * one of this node's handlers it does not wait for the
     * handlers (nor tell that count); from a handler on the transport's
     * receiving thread it returns at once and another thread closes. Requests
     * still waiting, queued async ones included, fail with a {@link NetworkException}.
     */
    @Override
    public void close() {
        core.close();
    }
}
