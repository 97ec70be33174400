package io.ibdxnet;

import io.ibdxnet.core.HandlerDispatch;
import io.ibdxnet.core.IncomingBufferQueue;
import io.ibdxnet.core.RateLimitedLog;
import io.ibdxnet.internal.CoreCounters;
import io.ibdxnet.internal.DeferredMessage;
import io.ibdxnet.internal.DeferredSends;
import io.ibdxnet.internal.DropNotices;
import io.ibdxnet.internal.IncomingPath;
import io.ibdxnet.internal.MessageSender;
import io.ibdxnet.internal.MessageTypes;
import io.ibdxnet.internal.PendingRequests;
import io.ibdxnet.internal.ResponseWait;
import io.ibdxnet.internal.Transports;
import io.ibdxnet.metrics.NodeMetrics;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.NodeId;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A running node's parts, put together: the transport and the receive and
 * send paths over it, started in order and closed in order. {@code DXNet}
 * is its public face.
 */
final class NodeCore {
    /**
     * How long {@code DXNet.close} waits for what was sent to leave this node
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

    /** The API's logger ({@code io.ibdxnet.DXNet}): what the node reports goes there. */
    private final Logger log;
    final DXNetConfig config;
    final CoreCounters counters = new CoreCounters();
    final RateLimitedLog warnings;
    final PendingRequests requests;
    final MessageTypes types = new MessageTypes();
    final IncomingBufferQueue ibq;
    final Transport transport;
    final MessageSender sender;
    /** Async sends that had to wait, sent in order by a small pool. */
    final DeferredSends deferred;
    final HandlerDispatch handlers;
    final IncomingPath incoming;
    /** Plain messages dropped here, summed per source until it is told. */
    final DropNotices drops;
    final LossReports losses;
    final NodeSends sends;
    final NodeStats stats;
    private final NodeMetrics metrics;
    /** Why a thread of the core died (null while healthy): the node would otherwise go deaf silently. */
    private volatile Throwable failure;
    private volatile boolean running = true;

    NodeCore(DXNetConfig config, Logger log) throws NetworkException {
        config.validate();
        this.log = log;
        this.config = config;
        this.warnings = new RateLimitedLog(log, 1_000);
        this.losses = new LossReports(config.nodeId, counters, warnings);
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
                losses.connectionEvent(node, true);
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
                losses.connectionEvent(node, false);
            }

            @Override
            public void onPossibleLoss(int node, long bytes, String reason) {
                losses.possiblyLost(node, bytes, reason);
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
                            losses.dropReported(source, messages, bytes, causes);
                        }
                    }, deferred::receivingThreadSendsWaiting, this::failed);
            this.sender = new MessageSender(config, transport, incoming);
            this.sends = new NodeSends(config, counters, warnings, requests, sender, deferred, incoming, losses,
                    new ResponseWait(transport), () -> running);
            this.stats = new NodeStats(counters, requests, ibq, handlers, sender, incoming);
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
        this.metrics = NodeMetrics.start(config.nodeId, NodeMetrics.kindOf(transport), stats::coreStats,
                transport::stats, config.statsIntervalMs);
    }

    // The parts built before the send path reach it through these (it is built last, on all of them).

    private void sendDeferred(DeferredMessage d) throws NetworkException {
        sends.sendDeferred(d);
    }

    private void deferredEnded(DeferredMessage d, Throwable failure) {
        sends.deferredEnded(d, failure);
    }

    private void answerWithError(Request<?> r, Throwable e) {
        sends.answerWithError(r, e);
    }

    private void tellDropped(int source, long messages, long bytes, String causes) {
        sends.tellDropped(source, messages, bytes, causes);
    }

    /** Received data becomes messages from now on (after the registrations of {@code beforeReceiving}). */
    void startReceiving() {
        if (running) { // unless beforeReceiving closed it
            incoming.start();
        }
    }

    boolean running() {
        return running;
    }

    /** {@code DXNet.addNode}: checked here, as the configured nodes are. */
    void addNode(int id, String hostPort) {
        if (!NodeId.isValid(id)) {
            throw new IllegalArgumentException("node id " + id + " is not in [" + NodeId.MIN + ", " + NodeId.MAX + "]");
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

    /** A thread of the core died: reported, never silent. */
    private void failed(Thread t, Throwable e) {
        failure = e;
        log.log(Level.SEVERE, "node " + config.nodeId + ": thread " + t.getName() + " died; this node no longer receives", e);
    }

    boolean healthy() {
        return failure == null && incoming.alive() == (running && incoming.receiving());
    }

    Throwable failure() {
        return failure;
    }

    /** {@code DXNet.close}, whose javadoc says what it promises. */
    void close() {
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
            if (exact && !fromOwnHandler && !handlers.awaitIdle(config.requestTimeoutMs)) {
                exact = false;
                // Their threads outlive the node until the handlers return: say so once, with the count.
                log.warning("node " + config.nodeId + ": closing with " + handlers.queued() + " message handler "
                        + "task(s) unfinished after " + config.requestTimeoutMs + " ms (requestTimeoutMs; a handler that "
                        + "blocks?); their threads end when the handlers return, and the peers are not told exactly "
                        + "what was handled");
            }
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
