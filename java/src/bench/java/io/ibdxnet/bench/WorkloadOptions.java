package io.ibdxnet.bench;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.MessageHandler;
import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.LinkedHashMap;
import java.util.Map;

/** {@link Workload}'s command line, and the node configuration every role derives from it. */
final class WorkloadOptions {
    static final String USAGE = "--transport ib|nio|loopback|none --fabric sim|auto|verbs --pattern uni|bi|all|rtt|idle"
            + " --nodes N --size BYTES --messages PER_SENDER_THREAD --gap-us US (rtt) --fanout K --active K (all) --threads SENDERS --handlers H"
            + " --orderPerSender true|false --receiveInline true|false --native KEY=VALUE (repeatable) --processes N"
            + " --seconds S --settle-ms MS (idle)";

    /** The answer to a request carries no bytes. */
    private static final byte[] NO_BYTES = new byte[0];

    final Results.Row row = new Results.Row();
    String fabric = "sim";
    boolean orderPerSender = true;
    boolean receiveInline = true;
    boolean handleOnReceivingThread;
    /** Engine settings, exactly as given (nothing is added: the engine's defaults apply otherwise). */
    final Map<String, String> nativeSettings = new LinkedHashMap<>();
    /** "main" (the default: runs the workload) or "child" (one of the other processes of --processes N). */
    String role = "main";
    /** A child's node id, and the address of node 0 (in the main process). */
    int nodeId;
    String node0;
    /** The outgoing ring per connection of the last node started (nio, loopback: nioRingSize), bytes. */
    private int ringSize = -1;
    /** Idle pattern: how long to measure, and how long to wait before (past the engine's parking thresholds). */
    double seconds = 10;
    long settleMs = 2_000;

    /** Parses {@code args}; exits with a usage message (status 2) on a bad one. Later options win. */
    static WorkloadOptions parse(String[] args) {
        WorkloadOptions o = new WorkloadOptions();
        Results.Row row = o.row;
        boolean nodesGiven = false;
        for (int i = 0; i < args.length; i += 2) {
            if (i + 1 >= args.length) {
                usage("option " + args[i] + " needs a value");
            }
            String v = args[i + 1];
            switch (args[i]) {
                case "--transport": row.impl = v; break;
                case "--fabric": o.fabric = v; break;
                case "--pattern": row.pattern = v; break;
                case "--nodes": row.nodes = Integer.parseInt(v); nodesGiven = true; break;
                case "--size": row.size = Integer.parseInt(v); break;
                case "--messages": row.messages = Long.parseLong(v); break;
                case "--gap-us": row.gapUs = Long.parseLong(v); break;
                case "--fanout": row.fanout = Integer.parseInt(v); break;
                case "--active": row.active = Integer.parseInt(v); break;
                case "--threads": row.senders = Integer.parseInt(v); break;
                case "--handlers": row.handlers = Integer.parseInt(v); break;
                case "--orderPerSender": o.orderPerSender = Boolean.parseBoolean(v); break;
                case "--receiveInline": o.receiveInline = Boolean.parseBoolean(v); break;
                case "--handleOnReceivingThread": o.handleOnReceivingThread = Boolean.parseBoolean(v); break;
                case "--processes": row.processes = Integer.parseInt(v); break;
                case "--role": o.role = v; break;
                case "--node-id": o.nodeId = Integer.parseInt(v); break;
                case "--node0": o.node0 = v; break;
                case "--seconds": o.seconds = Double.parseDouble(v); break;
                case "--settle-ms": o.settleMs = Long.parseLong(v); break;
                case "--native": {
                    int eq = v.indexOf('=');
                    if (eq < 1) {
                        usage("--native needs key=value");
                    }
                    o.nativeSettings.put(v.substring(0, eq), v.substring(eq + 1));
                    break;
                }
                default: usage("unknown option " + args[i]);
            }
        }
        if (!row.pattern.matches("uni|bi|all|rtt|idle") || row.nodes < 2 || row.size < 0 || row.messages < 1
                || row.senders < 1 || o.seconds <= 0 || o.settleMs < 0) {
            usage("bad pattern, nodes, size, messages, threads, seconds or settle-ms");
        }
        if (row.processes < 1 || row.processes > 1 && !row.pattern.matches("uni|bi|rtt|all")
                || row.processes > 2 && !row.pattern.equals("all")) {
            usage("--processes N (one node per process): 2 for uni, bi and rtt, 2 or more for all");
        }
        if (row.processes > 1 && row.pattern.equals("all")) {
            if (nodesGiven && row.nodes != row.processes) {
                usage("--processes N runs N nodes (--nodes, if given, must be N)");
            }
            row.nodes = row.processes;
        }
        if (!o.role.matches("main|child") || o.role.equals("child") && (o.node0 == null || o.nodeId < 1)) {
            usage("--role is main or child; a child needs --node-id ID (1 or more) and --node0 HOST:PORT");
        }
        if (row.impl.equals("none") && !row.pattern.equals("idle")) {
            usage("--transport none (a JVM without nodes) is for --pattern idle only");
        }
        if (!row.pattern.equals("all") && !row.pattern.equals("idle")) {
            row.nodes = 2;
        }
        // The row's settings other than the defaults: engine keys, and the core's receiveInline.
        StringBuilder s = new StringBuilder();
        o.nativeSettings.forEach((k, v) -> s.append(s.length() == 0 ? "" : ";").append(k).append('=').append(v));
        if (!o.receiveInline) {
            s.append(s.length() == 0 ? "" : ";").append("receiveInline=false");
        }
        if (s.length() > 0) {
            row.nativeSettings = s.toString();
        }
        return o;
    }

    /** nio and loopback: the outgoing ring per connection of the nodes started ({@code nioRingSize}), bytes. */
    long ringSize() {
        return ringSize;
    }

    static void usage(String problem) {
        System.err.println("workload: " + problem);
        System.err.println("options: " + USAGE);
        System.exit(2);
    }

    /**
     * Starts node {@code id} listening on {@code listen}: data messages go to
     * {@code onData}, requests are answered with an empty response.
     */
    DXNet startNode(int id, String listen, MessageHandler<BytesMessage> onData) throws Exception {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = row.impl;
        c.listen = listen;
        c.handlerThreads = row.handlers;
        c.orderPerSender = orderPerSender;
        c.receiveInline = receiveInline;
        c.handleOnReceivingThread = handleOnReceivingThread;
        c.requestTimeoutMs = 60_000;
        c.sendTimeoutMs = 60_000;
        c.nativeConfig.put("fabric", fabric);
        c.nativeConfig.putAll(nativeSettings);
        ringSize = c.nioRingSize;
        DXNet n = DXNet.start(c);
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        n.register(BytesMessage.class, onData);
        n.register(BytesRequest.class, ask -> n.reply(ask, new BytesResponse(ask, NO_BYTES)));
        return n;
    }
}
