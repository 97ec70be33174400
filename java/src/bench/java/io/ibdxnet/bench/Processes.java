package io.ibdxnet.bench;

import io.ibdxnet.DXNet;
import io.ibdxnet.MessageHandler;
import io.ibdxnet.app.BytesMessage;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@code --processes N}: node 0 in this JVM, nodes 1 … N-1 each in a JVM of
 * its own that this one starts with the same JVM options and stops at the
 * end, as a user's processes would run: uni and rtt with N = 2 (node 0 sends,
 * node 1 receives or answers), all with any N ≥ 2 (every node sends to every
 * other).
 *
 * <p>A child listens on a free port of 127.0.0.1 and prints {@code READY
 * port}; this process then writes the whole node table to every child's
 * standard input ({@code NODES 0=host:port 1=host:port …}), and a child
 * prints {@code PEERS} once it added them. A run ({@link #begin}) tells every
 * child to send its share ({@link Control#START}); a child whose node is to
 * receive data messages answers {@link Control.Done} once they arrived. A
 * child exits when asked ({@link Control#QUIT}), when this process's end
 * closes its standard input, or (status 3) when one of its senders failed.
 */
final class Processes implements AutoCloseable {
    /** The CPU time (ns), the peak resident set (bytes, -1 if unknown) and the committed heap (bytes) of processes. */
    record Usage(long cpuNanos, long peakRssBytes, long heapCommittedBytes) {}

    private final DXNet local;
    private final List<Process> children = new ArrayList<>();
    private volatile CountDownLatch done = new CountDownLatch(0);

    private Processes(DXNet local) {
        this.local = local;
    }

    /** Node 0 here ({@code onData} gets its data messages), nodes 1 … N-1 in new JVMs run with {@code args}; all connected. */
    static Processes start(WorkloadOptions o, String[] args, MessageHandler<BytesMessage> onData) throws Exception {
        int n = o.row.processes;
        DXNet local = o.startNode(0, "127.0.0.1:0", onData);
        local.registerMessageType(Control.ANSWER, Control.Answer.class);
        Processes ps = new Processes(local);
        try {
            local.register(Control.Done.class, d -> ps.done.countDown());
            List<BufferedReader> outs = new ArrayList<>();
            for (int id = 1; id < n; id++) {
                List<String> cmd = new ArrayList<>();
                cmd.add(System.getProperty("java.home") + "/bin/java");
                cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
                cmd.addAll(Arrays.asList("-cp", System.getProperty("java.class.path"), Workload.class.getName()));
                cmd.addAll(Arrays.asList(args));
                cmd.addAll(Arrays.asList("--role", "child", "--node-id", Integer.toString(id), "--node0",
                        "127.0.0.1:" + local.localPort()));
                Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
                ps.children.add(p);
                outs.add(new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)));
            }
            // The children start in parallel; the table once every one listens.
            StringBuilder table = new StringBuilder("NODES 0=127.0.0.1:" + local.localPort());
            for (int id = 1; id < n; id++) {
                String address = "127.0.0.1:" + expect(outs.get(id - 1), "READY ", id).trim();
                local.addNode(id, address);
                table.append(' ').append(id).append('=').append(address);
            }
            for (Process p : ps.children) {
                OutputStream in = p.getOutputStream();
                in.write((table + "\n").getBytes(StandardCharsets.UTF_8));
                in.flush();
            }
            for (int id = 1; id < n; id++) {
                expect(outs.get(id - 1), "PEERS", id);
                BufferedReader out = outs.get(id - 1);
                Thread drain = new Thread(() -> {
                    try {
                        while (out.readLine() != null) {
                            // nothing else is expected; reading keeps the pipe from filling up
                        }
                    } catch (IOException e) {
                        // the child is gone
                    }
                }, "child-stdout-" + id);
                drain.setDaemon(true);
                drain.start();
            }
            return ps;
        } catch (Exception e) {
            ps.close();
            throw e;
        }
    }

    /** The rest of the first line from {@code out} that starts with {@code prefix} (other lines are skipped). */
    private static String expect(BufferedReader out, String prefix, int id) throws IOException {
        for (String line = out.readLine(); line != null; line = out.readLine()) {
            if (line.startsWith(prefix)) {
                return line.substring(prefix.length());
            }
        }
        throw new IllegalStateException("the process of node " + id + " ended before printing " + prefix.trim());
    }

    /** The node in this process (node 0). */
    DXNet local() {
        return local;
    }

    /** The CPU time of all child processes (all their threads), their peak resident sets and committed heaps, summed. */
    Usage childUsage() {
        long cpu = 0;
        long rss = 0;
        long heap = 0;
        for (int id = 1; id <= children.size(); id++) {
            Control.Answer a = local.sendSync(new Control.Ask(id, Control.CPU), 60_000);
            cpu += a.cpuNanos;
            rss = rss < 0 || a.peakRssBytes < 0 ? -1 : rss + a.peakRssBytes;
            heap += a.heapCommittedBytes;
        }
        return new Usage(cpu, rss, heap);
    }

    /** Starts {@code run} in every child: each sends its share, and {@link #awaitAll} waits for their deliveries. */
    void begin(Results.Row run) {
        int receiving = 0;
        for (int id = 1; id <= children.size(); id++) {
            if (Workload.expectedAt(run, id) > 0) {
                receiving++;
            }
        }
        done = new CountDownLatch(receiving);
        for (int id = 1; id <= children.size(); id++) {
            local.sendSync(new Control.Ask(id, run), 60_000);
        }
    }

    /** Waits until every child's node has had its data messages of the run; fails when a child ended. */
    void awaitAll() throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(600);
        while (!done.await(100, TimeUnit.MILLISECONDS)) {
            checkAlive();
            if (System.nanoTime() > end) {
                throw new IllegalStateException(done.getCount() + " child processes did not get all messages in 600 s");
            }
        }
    }

    /** Fails when a child process ended (a run cannot complete then). */
    void checkAlive() {
        for (int i = 0; i < children.size(); i++) {
            if (!children.get(i).isAlive()) {
                throw new IllegalStateException("the process of node " + (i + 1) + " ended (status "
                        + children.get(i).exitValue() + ") before the run was complete");
            }
        }
    }

    /** Stops the child processes (asked, then killed if they do not exit), then node 0. */
    @Override
    public void close() {
        try {
            for (int i = 0; i < children.size(); i++) {
                if (children.get(i).isAlive()) {
                    try {
                        local.sendSync(new Control.Ask(i + 1, Control.QUIT), 10_000);
                    } catch (RuntimeException e) {
                        System.err.println("workload: stopping the process of node " + (i + 1) + ": " + e);
                    }
                }
            }
            for (Process p : children) {
                p.waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            for (Process p : children) {
                p.destroyForcibly();
            }
            local.close();
        }
    }

    /**
     * A child process's main ({@code --role child --node-id ID --node0 HOST:PORT}):
     * node ID until asked to quit.
     */
    static void child(WorkloadOptions o) throws Exception {
        int self = o.nodeId;
        Results.Row row = o.row;
        // Data messages received, and how many the runs so far were to bring
        // (cumulative: another child may start sending before this one's START).
        AtomicLong received = new AtomicLong();
        AtomicLong target = new AtomicLong();
        AtomicLong announced = new AtomicLong();
        AtomicLongArray from = new AtomicLongArray(row.nodes);
        DXNet[] node = new DXNet[1];
        Runnable check = () -> {
            long t = target.get();
            if (received.get() >= t && announced.getAndSet(t) != t) {
                node[0].sendMessage(new Control.Done(0));
            }
        };
        CountDownLatch quit = new CountDownLatch(1);
        DXNet n = o.startNode(self, "127.0.0.1:0", m -> {
            from.incrementAndGet(m.getSource());
            if (received.incrementAndGet() >= target.get()) {
                check.run();
            }
        });
        node[0] = n;
        n.registerMessageType(Control.DONE, Control.Done.class);
        n.register(Control.Ask.class, ask -> {
            Results.Row run = null;
            if (ask.op == Control.START) {
                run = row.copy();
                run.senders = ask.senders;
                run.messages = ask.messages;
                run.size = ask.size;
                target.addAndGet(Workload.expectedAt(run, self));
            }
            n.reply(ask, new Control.Answer(ask));
            if (run != null) {
                check.run();
                sendShare(n, run);
            }
            if (ask.op == Control.QUIT) {
                quit.countDown();
            }
        });
        n.addNode(0, o.node0);
        // The first process's end (normal or not) closes our standard input: do not outlive it.
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Thread orphan = new Thread(() -> {
            try {
                while (in.readLine() != null) {
                    // nothing more is sent on it
                }
            } catch (IOException e) {
                // closed
            }
            quit.countDown();
        }, "parent-watch");
        orphan.setDaemon(true);
        System.out.println("READY " + n.localPort());
        System.out.flush();
        String table = in.readLine();
        if (table == null || !table.startsWith("NODES ")) {
            System.err.println("workload: node " + self + " got no node table: " + table);
            n.close();
            System.exit(2);
        }
        for (String entry : table.substring(6).trim().split(" ")) {
            int eq = entry.indexOf('=');
            int id = Integer.parseInt(entry.substring(0, eq));
            if (id != self && id != 0) {
                n.addNode(id, entry.substring(eq + 1));
            }
        }
        System.out.println("PEERS");
        System.out.flush();
        orphan.start();
        quit.await();
        Thread.sleep(200); // the last answer leaves before the node closes
        n.close();
        System.err.println(receivedLine(self, from));
        System.exit(0);
    }

    /**
     * {@code RECEIVED node=ID 0=COUNT 1=COUNT …}: the data messages node
     * {@code self} had from each other node over the whole process (the
     * mesh, the warm-up and the measured run); printed on stderr at the end.
     */
    static String receivedLine(int self, AtomicLongArray from) {
        StringBuilder b = new StringBuilder("RECEIVED node=").append(self);
        for (int i = 0; i < from.length(); i++) {
            if (i != self) {
                b.append(' ').append(i).append('=').append(from.get(i));
            }
        }
        return b.toString();
    }

    /** Sends node {@code n}'s share of {@code run} from threads of their own; a failure ends the process (status 3). */
    private static void sendShare(DXNet n, Results.Row run) {
        if (!Workload.sends(run, n.nodeId())) {
            return;
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = Workload.startSenders(n, run, null, failure);
        Thread watch = new Thread(() -> {
            try {
                for (Thread t : threads) {
                    t.join();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (failure.get() != null) {
                System.err.println("workload: a sender of node " + n.nodeId() + " failed:");
                failure.get().printStackTrace();
                System.exit(3);
            }
        }, "senders-watch");
        watch.setDaemon(true);
        watch.start();
    }
}
