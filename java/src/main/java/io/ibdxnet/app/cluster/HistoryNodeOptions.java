package io.ibdxnet.app.cluster;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The command line of a {@link HistoryNode}; {@link #USAGE} lists it. */
final class HistoryNodeOptions {
    static final String USAGE = "options: --node I --nodes HOST:PORT,HOST:PORT,... (node i listens on the i-th)"
            + " --history FILE [--transport ib|nio] [--fabric auto|sim|simhost|verbs] [--seconds S]"
            + " [--rate MSGS_PER_S_PER_PEER] [--size BYTES] [--requests-per-second Q_PER_PEER] [--deadline-ms D]"
            + " [--linger-ms L] [--connect-timeout-ms C] [--send-timeout-ms T] [--idle-timeout-ms I]"
            + " [--incarnation K (default: the start time in ms)] [--table-at-start true|false]"
            + " [--start-at-ms EPOCH_MS] [--stop-at-ms EPOCH_MS (instead of --seconds)]"
            + " [--stop-file PATH (stop sending once it exists)]"
            + " [--window FLOW_CONTROL_BYTES] [--handler-us MICROS_PER_MESSAGE]"
            + " [--native KEY=VALUE (an engine key, ib only; repeatable)]";

    int node = -1;
    List<String> nodes;
    String transport = "nio";
    String fabric = "auto";
    double seconds = 10;
    int rate = 2000;
    int size = 64;
    int requestsPerSecond = 50;
    int deadlineMs = 2000;
    int lingerMs = 3000;
    /** Short, so a send to a node that is gone fails soon (its thread alone waits meanwhile). */
    int connectTimeoutMs = 2000;
    int sendTimeoutMs = 2000;
    /** 0: the library's default. */
    int idleTimeoutMs;
    long incarnation = System.currentTimeMillis();
    /**
     * Wall-clock times (ms) to begin and to stop sending, shared by every
     * node of a run, so that they send over the same span whenever their
     * JVMs came up: nobody is still sending to a node that closed (its
     * losses would be reported, but they are not the scenario). 0: begin
     * at once, stop after {@code --seconds}.
     */
    long startAtMs;
    long stopAtMs;
    /**
     * Sending also stops once this file exists (checked every 50 ms): a
     * harness that must see a late-started node send for a while ends the
     * run when it has, however long that node's JVM took to come up.
     */
    Path stopFile;
    /** Flow-control window in bytes (0: the library's default); small: confirmations come often. */
    long window;
    /**
     * Microseconds each message handler works (sleeps) before it records the
     * message: a slow application, whose handler queue holds messages the
     * node took off the wire but has not handled yet.
     */
    int handlerMicros;
    /**
     * Peers in {@code DXNetConfig.nodes} (the documented way) instead of
     * added with {@code addNode} after the start. Either way the receivers
     * are registered in {@code DXNet.start}'s {@code beforeReceiving}, so a
     * restarted node handles what its peers send at once (before that start
     * existed, a node in the table at start dropped them as "no receiver").
     */
    boolean tableAtStart;
    Path history;
    /** Engine keys ({@code native.<key>}) given with {@code --native}, in order. */
    final Map<String, String> nativeKeys = new LinkedHashMap<>();

    static HistoryNodeOptions parse(String[] args) {
        HistoryNodeOptions o = new HistoryNodeOptions();
        for (int i = 0; i < args.length; i += 2) {
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException("option " + args[i] + " needs a value");
            }
            String v = args[i + 1];
            switch (args[i]) {
                case "--node": o.node = Integer.parseInt(v); break;
                case "--nodes": o.nodes = Arrays.asList(v.split(",")); break;
                case "--transport": o.transport = v; break;
                case "--fabric": o.fabric = v; break;
                case "--seconds": o.seconds = Double.parseDouble(v); break;
                case "--rate": o.rate = Integer.parseInt(v); break;
                case "--size": o.size = Integer.parseInt(v); break;
                case "--requests-per-second": o.requestsPerSecond = Integer.parseInt(v); break;
                case "--deadline-ms": o.deadlineMs = Integer.parseInt(v); break;
                case "--linger-ms": o.lingerMs = Integer.parseInt(v); break;
                case "--connect-timeout-ms": o.connectTimeoutMs = Integer.parseInt(v); break;
                case "--send-timeout-ms": o.sendTimeoutMs = Integer.parseInt(v); break;
                case "--idle-timeout-ms": o.idleTimeoutMs = Integer.parseInt(v); break;
                case "--incarnation": o.incarnation = Long.parseLong(v); break;
                case "--history": o.history = Paths.get(v); break;
                case "--start-at-ms": o.startAtMs = Long.parseLong(v); break;
                case "--stop-at-ms": o.stopAtMs = Long.parseLong(v); break;
                case "--stop-file": o.stopFile = Paths.get(v); break;
                case "--window": o.window = Long.parseLong(v); break;
                case "--handler-us": o.handlerMicros = Integer.parseInt(v); break;
                case "--table-at-start": o.tableAtStart = Boolean.parseBoolean(v); break;
                case "--native": {
                    int eq = v.indexOf('=');
                    if (eq <= 0) {
                        throw new IllegalArgumentException("--native needs KEY=VALUE, not " + v);
                    }
                    o.nativeKeys.put(v.substring(0, eq), v.substring(eq + 1));
                    break;
                }
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (o.nodes == null || o.node < 0 || o.node >= o.nodes.size()) {
            throw new IllegalArgumentException("--node must index --nodes");
        }
        if (o.history == null) {
            throw new IllegalArgumentException("--history FILE is required");
        }
        if (o.rate < 0 || o.requestsPerSecond < 0 || o.deadlineMs <= 0 || o.seconds < 0 || o.lingerMs < 0) {
            throw new IllegalArgumentException("rates, seconds and linger must be >= 0, the deadline > 0");
        }
        return o;
    }
}
