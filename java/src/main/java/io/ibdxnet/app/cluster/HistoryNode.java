package io.ibdxnet.app.cluster;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.ArrayList;
import java.util.List;

/**
 * One node of an N-node cluster in its own process, writing the history that
 * {@link HistoryCheck} judges. Every node sends paced messages and requests
 * to every other ({@link PeerSender}, a thread per peer) for
 * {@code --seconds} (or until {@code --stop-at-ms}) and answers every
 * request; then it drains its peers ({@link #drainPeers}), waits for its
 * open requests to end and for its peers to drain it (within
 * {@code --linger-ms}, so late messages are counted), and closes. What the
 * library tells it goes into the history ({@link HistoryLog}): each send's
 * outcome, each request's, every possible loss
 * ({@link DXNet#setLossListener}, the public route of the transports'
 * {@code onPossibleLoss}) and every connection event. A restarted node is a
 * new process with the same {@code --node} and address, a new history file
 * and a new incarnation; the others reconnect to it on their next send.
 * SIGTERM stops it the orderly way (the shutdown hook); SIGKILL leaves a
 * history without its {@code end} line.
 */
public final class HistoryNode {
    private final HistoryNodeOptions o;
    private final HistoryLog log;
    private final RequestsInFlight inFlight = new RequestsInFlight();
    private final List<PeerSender> senders = new java.util.concurrent.CopyOnWriteArrayList<>();
    private volatile DXNet net;
    /** Peers whose drain request this incarnation answered. */
    private final java.util.Set<Integer> drainedBy = java.util.concurrent.ConcurrentHashMap.newKeySet();

    private HistoryNode(HistoryNodeOptions o, HistoryLog log) {
        this.o = o;
        this.log = log;
    }

    public static void main(String[] args) throws Exception {
        HistoryNodeOptions o;
        try {
            o = HistoryNodeOptions.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("history-node: " + e.getMessage());
            System.err.println(HistoryNodeOptions.USAGE);
            System.exit(2);
            return;
        }
        HistoryNode n = new HistoryNode(o, new HistoryLog(o.history));
        Thread hook = new Thread(() -> n.stop("signal"), "history-node-stop");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            n.run();
        } catch (Exception e) {
            System.err.println("history-node " + o.node + " failed: " + e);
            e.printStackTrace();
            n.stop("failed: " + e);
            System.exit(1);
        }
        n.stop("done");
        System.exit(0); // the node's daemon threads are gone; the hook finds the history ended
    }

    /** Types, listeners and receivers: run by {@code DXNet.start} before anything received is handled. */
    private void setUp(DXNet n) {
        n.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        n.setLossListener((node, bytes, reason) -> log.writeNow("loss", node, bytes, reason));
        n.setConnectionListener(new DXNet.ConnectionListener() {
            @Override
            public void connected(int node) {
                log.write("conn", node, "up");
            }

            @Override
            public void disconnected(int node) {
                log.write("conn", node, "down");
            }
        });
        n.register(BytesMessage.class, m -> received(m.bytes));
        n.register(BytesRequest.class, r -> {
            if (r.bytes.length == 0) { // a peer's drain: everything it sent before was handled (order per sender)
                log.write("drained", r.getSource());
                drainedBy.add(r.getSource());
            } else {
                Payload p = Payload.decode(r.bytes);
                // Written through before the answer leaves: a requester's answer implies our record.
                log.writeNow("reqhandled", p.sender, p.incarnation, p.seq, p.intact ? "ok" : "bad");
            }
            n.reply(r, BytesResponse.echo(r));
        });
    }

    private void run() throws Exception {
        log.writeNow("start", o.node, o.incarnation, o.transport); // a node killed at once still names itself
        // Receivers first, then anything received (peers in the table at start may send at once).
        DXNet n = DXNet.start(config(), this::setUp);
        net = n;
        if (!o.tableAtStart) {
            addPeers(n::addNode);
        }
        long wait = o.startAtMs - System.currentTimeMillis();
        if (wait > 0) {
            Thread.sleep(wait); // the peers are in the table meanwhile: connections can come up
        }
        System.out.printf("history-node %d (incarnation %d) on %s, %s transport, fabric %s: sending for %.1f s%n",
                o.node, o.incarnation, o.nodes.get(o.node), o.transport, n.fabricName(),
                o.stopAtMs > 0 ? (o.stopAtMs - System.currentTimeMillis()) / 1e3 : o.seconds);
        List<Thread> threads = new ArrayList<>();
        for (int dest = 0; dest < o.nodes.size(); dest++) {
            if (dest != o.node) {
                PeerSender s = new PeerSender(n, log, o, inFlight, dest);
                senders.add(s);
                Thread t = new Thread(s, "history-send-" + dest);
                threads.add(t);
                t.start();
            }
        }
        Thread watcher = o.stopFile == null ? null : stopWhenFileAppears();
        for (Thread t : threads) {
            t.join();
        }
        if (watcher != null) {
            watcher.interrupt();
        }
        long lingerEnd = System.currentTimeMillis() + o.lingerMs;
        drainPeers(n, lingerEnd);
        // Every request ends by its deadline; a little beyond it, whatever is open is hung.
        long waitUntil = Math.max(lingerEnd, System.currentTimeMillis() + o.deadlineMs + 1000);
        while (!inFlight.isEmpty() && System.currentTimeMillis() < waitUntil) {
            Thread.sleep(10);
        }
        // Stay until every peer drained us (or the linger is over: a peer that is gone never will).
        while (drainedBy.size() < o.nodes.size() - 1 && System.currentTimeMillis() < lingerEnd) {
            Thread.sleep(10);
        }
        System.out.printf("history-node %d: done (drained by %d of %d peers)%n", o.node, drainedBy.size(),
                o.nodes.size() - 1);
    }

    /** A daemon that stops the senders once {@code --stop-file} exists. */
    private Thread stopWhenFileAppears() {
        Thread t = new Thread(() -> {
            try {
                while (!java.nio.file.Files.exists(o.stopFile)) {
                    Thread.sleep(50);
                }
                log.write("note", "stop file " + o.stopFile + " appeared");
                for (PeerSender s : senders) {
                    s.stop();
                }
            } catch (InterruptedException e) {
                // the senders ended by their time
            }
        }, "history-stop-file");
        t.setDaemon(true);
        t.start();
        return t;
    }

    /**
     * Asks every peer an empty request once sending is over: it is answered
     * after the peer handled everything we sent before it (one sender's
     * messages are handled in order), so nobody closes while its messages
     * still wait in a peer's handler queue, and the end of a run loses nothing.
     */
    private void drainPeers(DXNet n, long until) {
        List<java.util.concurrent.CompletableFuture<BytesResponse>> answers = new ArrayList<>();
        List<Integer> peers = new ArrayList<>();
        int timeout = (int) Math.max(1, until - System.currentTimeMillis());
        for (int dest = 0; dest < o.nodes.size(); dest++) {
            if (dest != o.node) {
                peers.add(dest);
                answers.add(n.sendAsync(new BytesRequest(dest, new byte[0]), timeout));
            }
        }
        for (int i = 0; i < peers.size(); i++) {
            try {
                answers.get(i).join();
                log.write("drain", peers.get(i), "answered");
            } catch (java.util.concurrent.CompletionException e) {
                log.write("drain", peers.get(i), "failed", e.getCause());
            }
        }
    }

    private void received(byte[] bytes) {
        if (o.handlerMicros > 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(o.handlerMicros * 1000L);
        }
        Payload p = Payload.decode(bytes);
        log.writeNow("recv", p.sender, p.incarnation, p.seq, p.length, p.crc, p.intact ? "ok" : "bad");
    }

    private void addPeers(java.util.function.BiConsumer<Integer, String> add) {
        for (int i = 0; i < o.nodes.size(); i++) {
            if (i != o.node) {
                add.accept(i, o.nodes.get(i));
            }
        }
    }

    private DXNetConfig config() {
        DXNetConfig c = new DXNetConfig(o.node);
        c.transport = o.transport;
        c.listen = o.nodes.get(o.node);
        if (o.tableAtStart) {
            addPeers(c.nodes::put);
        }
        c.connectTimeoutMs = o.connectTimeoutMs;
        c.sendTimeoutMs = o.sendTimeoutMs;
        c.requestTimeoutMs = o.deadlineMs;
        if (o.window > 0) {
            c.flowControlWindow = o.window;
        }
        if (o.idleTimeoutMs > 0) {
            c.idleTimeoutMs = o.idleTimeoutMs;
            c.keepAliveMs = Math.max(1, Math.min(c.keepAliveMs, o.idleTimeoutMs / 4)); // must stay below it
        }
        if (o.transport.equals("ib")) {
            c.nativeConfig.put("fabric", o.fabric);
            // Modest native memory: several nodes share one host (as in DemoMain).
            c.nativeConfig.put("send_ring_size", Integer.toString(1 << 20));
            c.nativeConfig.put("srq_size", "256");
            c.nativeConfig.put("recv_buffer_count", "2048");
            c.nativeConfig.putAll(o.nativeKeys);
        }
        return c;
    }

    /**
     * Ends the run the orderly way, once (normal end or SIGTERM): senders
     * stop, requests still open are written as pending, the node closes
     * (peers learn what it handled), then {@code end}.
     */
    private synchronized void stop(String why) {
        for (PeerSender s : senders) {
            s.stop();
        }
        // Before the close, which would fail them as CLOSED and hide a hang.
        inFlight.writePending(log);
        DXNet n = net;
        net = null;
        if (n != null) {
            writeStats(n);
            try {
                n.close();
            } catch (RuntimeException e) {
                log.write("note", "close failed: " + e);
            }
        }
        log.end(why);
    }

    /**
     * The transport's counters as the node ends ({@code DXNet.transportStats},
     * on ib the engine's: the authentication layer's {@code dropped_unauthenticated}
     * among them): one {@code stats} line of {@code key=value} pairs in the
     * history, and the same on stdout.
     */
    private void writeStats(DXNet n) {
        try {
            StringBuilder b = new StringBuilder();
            n.transportStats().forEach((k, v) -> b.append(b.length() == 0 ? "" : " ").append(k).append('=').append(v));
            log.write("stats", b);
            System.out.println("history-node " + o.node + ": transportStats " + b);
        } catch (RuntimeException e) {
            log.write("note", "transportStats failed: " + e);
        }
    }
}
