package io.ibdxnet;

import io.ibdxnet.core.Frame;
import io.ibdxnet.core.IncomingBufferQueue;
import io.ibdxnet.core.StreamAssembler;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.Transports;
import io.ibdxnet.transport.TransportListener;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
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
 */
public final class DXNet implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(DXNet.class.getName());

    private final DXNetConfig config;
    private final Transport transport;
    private final IncomingBufferQueue ibq;
    private final Thread coordinator;
    private final ThreadPoolExecutor handlers;
    /** By {@link #key}: arrays, not maps (a boxed key per message showed in profiles). */
    private final AtomicReferenceArray<Constructor<? extends Message>> types = new AtomicReferenceArray<>(1 << 16);
    private final AtomicReferenceArray<MessageReceiver> receivers = new AtomicReferenceArray<>(1 << 16);
    private final Map<Integer, CompletableFuture<Response>> pending = new ConcurrentHashMap<>();
    private final Map<Integer, Integer> pendingTarget = new ConcurrentHashMap<>();
    private final AtomicInteger nextRequestId = new AtomicInteger(1);
    private final AtomicInteger nextMessageId = new AtomicInteger();
    private final AtomicReferenceArray<StreamAssembler> assemblers = new AtomicReferenceArray<>(1 << 16);
    private final AtomicLong dropped = new AtomicLong();
    private volatile boolean running = true;

    private DXNet(DXNetConfig config) throws NetworkException {
        config.validate();
        this.config = config;
        this.ibq = new IncomingBufferQueue(config.ibqMaxBuffers, config.ibqMaxBytes);
        TransportListener listener = new TransportListener() {
            @Override
            public boolean onBuffer(IncomingBuffer b) {
                return ibq.offer(b);
            }

            @Override
            public void onDisconnected(int node) {
                failRequestsTo(node);
            }
        };
        this.transport = Transports.open(config, listener);
        for (Map.Entry<Integer, String> n : config.nodes.entrySet()) {
            if (n.getKey() != config.nodeId) {
                addNode(n.getKey(), n.getValue());
            }
        }
        AtomicInteger handlerIndex = new AtomicInteger();
        this.handlers = new ThreadPoolExecutor(config.handlerThreads, config.handlerThreads, 0, TimeUnit.MILLISECONDS,
                new ArrayBlockingQueue<>(config.handlerQueueSize), r -> {
                    Thread t = new Thread(r, "dxnet-handler-" + config.nodeId + "-" + handlerIndex.getAndIncrement());
                    t.setDaemon(true);
                    return t;
                }, (task, pool) -> {
                    // Full: the coordinator waits (backpressure) instead of running the
                    // task itself, which would reorder messages.
                    try {
                        pool.getQueue().put(task);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
        this.coordinator = new Thread(this::coordinate, "dxnet-mcc-" + config.nodeId);
        this.coordinator.setDaemon(true);
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

    /** Delivers messages of {@code type/subtype} to {@code receiver} (on handler threads). */
    public void register(byte type, byte subtype, MessageReceiver receiver) {
        receivers.set(key(type, subtype), receiver);
    }

    /** Sends {@code message} to its destination. */
    public void sendMessage(Message message) throws NetworkException {
        send(message, 0, 0);
    }

    /** Sends {@code request} and waits for its response. */
    @SuppressWarnings("unchecked")
    public <T extends Response> T sendSync(Request request, int timeoutMs) throws NetworkException {
        CompletableFuture<Response> f = sendAsync(request);
        try {
            return (T) f.get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            pending.remove(request.requestId);
            pendingTarget.remove(request.requestId);
            throw new RequestTimeoutException("no response to request " + request.requestId + " from node "
                    + request.getDestination() + " within " + timeoutMs + " ms");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new NetworkException("interrupted while waiting for a response", e);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            throw cause instanceof NetworkException ? (NetworkException) cause : new NetworkException(cause.toString(), cause);
        }
    }

    /** Sends {@code request}; the future completes with the response, or exceptionally. */
    public CompletableFuture<Response> sendAsync(Request request) throws NetworkException {
        int id = nextRequestId.getAndIncrement();
        request.requestId = id;
        CompletableFuture<Response> f = new CompletableFuture<>();
        pending.put(id, f);
        pendingTarget.put(id, request.getDestination());
        try {
            send(request, Frame.REQUEST, id);
        } catch (NetworkException e) {
            pending.remove(id);
            pendingTarget.remove(id);
            throw e;
        }
        return f;
    }

    private void send(Message m, int kindFlags, int requestId) throws NetworkException {
        if (!running) {
            throw new NetworkException("DXNet is closed");
        }
        int dest = m.getDestination();
        if (dest < 0 || dest > 0xFFFE) {
            throw new IllegalArgumentException("message has no valid destination (" + dest + ")");
        }
        if (m instanceof Response) {
            kindFlags = Frame.RESPONSE;
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
    private static final class Batch implements Runnable {
        final List<MessageReceiver> receivers = new ArrayList<>();
        final List<Message> messages = new ArrayList<>();

        @Override
        public void run() {
            for (int i = 0; i < messages.size(); i++) {
                Message m = messages.get(i);
                try {
                    receivers.get(i).onIncomingMessage(m);
                } catch (RuntimeException e) {
                    LOG.log(Level.SEVERE, "receiver of " + m.getType() + "/" + m.getSubtype() + " failed", e);
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
        StreamAssembler.Sink sink = (src, type, sub, flags, req, base, offset, length) ->
                deliver(src, type, sub, flags, req, importer.reset(base, offset, length), batch);
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
                StreamAssembler a = assemblers.get(b.source);
                if (a == null || a.connection() != b.connection) {
                    a = new StreamAssembler(b.source, b.connection);
                    assemblers.set(b.source, a);
                }
                a.feed(b.address, b.length, sink);
            } catch (RuntimeException e) {
                LOG.log(Level.SEVERE, "dropping the stream state of node " + b.source, e);
                assemblers.set(b.source, null);
            } finally {
                b.release();
                transport.consumed(b);
            }
            if (!batch.messages.isEmpty()) {
                handlers.execute(batch);
                batch = new Batch();
            }
        }
    }

    private void deliver(int source, byte type, byte subtype, int flags, int requestId, byte[] payload) {
        deliver(source, type, subtype, flags, requestId, new MessageImporter(payload, payload.length), null);
    }

    /** Creates the message and queues it for its receiver: into {@code into}, or as its own task. */
    private void deliver(int source, byte type, byte subtype, int flags, int requestId, MessageImporter payload, Batch into) {
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
        } catch (ReflectiveOperationException | RuntimeException e) {
            dropped.incrementAndGet();
            LOG.log(Level.WARNING, "cannot create message " + type + "/" + subtype + " from " + source, e);
            return;
        }
        if ((flags & Frame.RESPONSE) != 0 && m instanceof Response) {
            ((Response) m).requestId = requestId;
            CompletableFuture<Response> f = pending.remove(requestId);
            pendingTarget.remove(requestId);
            if (f != null) {
                f.complete((Response) m);
            } else {
                dropped.incrementAndGet(); // late response after a timeout
            }
            return;
        }
        if (m instanceof Request) {
            ((Request) m).requestId = requestId;
        }
        MessageReceiver r = receivers.get(key(type, subtype));
        if (r == null) {
            dropped.incrementAndGet();
            LOG.warning("node " + config.nodeId + ": no receiver for " + type + "/" + subtype);
            return;
        }
        Batch b = into != null ? into : new Batch();
        b.receivers.add(r);
        b.messages.add(m);
        if (into == null) {
            handlers.execute(b);
        }
    }

    private void failRequestsTo(int node) {
        for (Map.Entry<Integer, Integer> e : pendingTarget.entrySet()) {
            if (e.getValue() == node) {
                CompletableFuture<Response> f = pending.remove(e.getKey());
                pendingTarget.remove(e.getKey());
                if (f != null) {
                    f.completeExceptionally(new NetworkException("node " + node + " disconnected"));
                }
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
        return handlers.getQueue().size();
    }

    /** The largest frame the transport carries; larger messages are sent in frames of this size. */
    public int maxFrameSize() {
        return transport.maxFrameSize();
    }

    /** The device the transport runs on (e.g. {@code rxe0}, {@code sim2}). */
    public String fabricName() {
        return transport.name();
    }

    /** Native transport counters. */
    public Map<String, Long> transportStats() {
        return transport.stats();
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
        transport.close();
        handlers.shutdown();
        for (CompletableFuture<Response> f : pending.values()) {
            f.completeExceptionally(new NetworkException("DXNet closed"));
        }
        pending.clear();
    }
}
