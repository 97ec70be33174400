package io.ibdxnet.bench;

import io.ibdxnet.DXNet;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code --processes 2}: node 0 (the senders) in this JVM, node 1 (the
 * receiver) in a JVM of its own that this one starts with the same JVM
 * options and stops at the end, as a user's two processes would run. The
 * receiver listens on a free port of 127.0.0.1 and prints it; it exits when
 * asked or when this process's end closes its standard input.
 */
final class TwoProcesses implements AutoCloseable {
    private final DXNet local;
    private final Process receiver;
    private volatile CountDownLatch done = new CountDownLatch(1);

    private TwoProcesses(DXNet local, Process receiver) {
        this.local = local;
        this.receiver = receiver;
    }

    /** Node 0 here, node 1 in a new JVM run with {@code args} as a receiver; both connected. */
    static TwoProcesses start(WorkloadOptions o, String[] args) throws Exception {
        DXNet local = o.startNode(0, "127.0.0.1:0", m -> {});
        local.registerMessageType(Control.ANSWER, Control.Answer.class);
        List<String> cmd = new ArrayList<>();
        cmd.add(System.getProperty("java.home") + "/bin/java");
        cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        cmd.addAll(Arrays.asList("-cp", System.getProperty("java.class.path"), Workload.class.getName()));
        cmd.addAll(Arrays.asList(args));
        cmd.addAll(Arrays.asList("--role", "receiver", "--node0", "127.0.0.1:" + local.localPort()));
        Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        TwoProcesses two = new TwoProcesses(local, p);
        try {
            local.register(Control.Done.class, d -> two.done.countDown());
            BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            String ready = out.readLine();
            if (ready == null || !ready.startsWith("READY ")) {
                throw new IllegalStateException("the receiver process did not start: " + ready);
            }
            local.addNode(1, "127.0.0.1:" + ready.substring(6).trim());
            Thread drain = new Thread(() -> {
                try {
                    while (out.readLine() != null) {
                        // nothing else is expected; reading keeps the pipe from filling up
                    }
                } catch (java.io.IOException e) {
                    // the receiver is gone
                }
            }, "receiver-stdout");
            drain.setDaemon(true);
            drain.start();
            return two;
        } catch (Exception e) {
            two.close();
            throw e;
        }
    }

    /** The node in this process (node 0). */
    DXNet local() {
        return local;
    }

    /** Starts a run of {@code expected} data messages (0: none); returns the receiver's CPU time, ns. */
    long begin(long expected) throws Exception {
        done = new CountDownLatch(1);
        return ask(Control.START, expected);
    }

    /** Waits until the receiver has had the run's {@code expected} data messages. */
    void awaitAll() throws InterruptedException {
        if (!done.await(600, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the receiver process did not get all messages in 600 s");
        }
    }

    /** The receiver's process CPU time (all its threads), ns. */
    long receiverCpuNanos() throws Exception {
        return ask(Control.CPU, 0);
    }

    private long ask(byte op, long value) throws Exception {
        return local.sendSync(new Control.Ask(1, op, value), 60_000).cpuNanos;
    }

    /** Stops the receiver process (asked, then killed if it does not exit), then node 0. */
    @Override
    public void close() {
        try {
            if (receiver.isAlive()) {
                ask(Control.QUIT, 0);
                receiver.waitFor(10, TimeUnit.SECONDS);
            }
        } catch (Exception e) {
            System.err.println("workload: stopping the receiver process: " + e);
        } finally {
            receiver.destroyForcibly();
            local.close();
        }
    }

    /** The receiver process's main ({@code --role receiver}): node 1 until asked to quit. */
    static void receive(WorkloadOptions o) throws Exception {
        AtomicLong received = new AtomicLong();
        AtomicLong target = new AtomicLong(Long.MAX_VALUE);
        DXNet[] self = new DXNet[1];
        CountDownLatch quit = new CountDownLatch(1);
        DXNet n = o.startNode(1, "127.0.0.1:0", m -> {
            if (received.incrementAndGet() == target.get()) {
                self[0].sendMessage(new Control.Done(0));
            }
        });
        self[0] = n;
        n.registerMessageType(Control.DONE, Control.Done.class);
        n.register(Control.Ask.class, ask -> {
            if (ask.op == Control.START) {
                received.set(0);
                target.set(ask.value);
            }
            n.reply(ask, new Control.Answer(ask, Results.processCpuNanos()));
            if (ask.op == Control.QUIT) {
                quit.countDown();
            }
        });
        n.addNode(0, o.node0);
        // The sender's end (normal or not) closes our standard input: do not outlive it.
        Thread orphan = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // nothing is sent on it
                }
            } catch (java.io.IOException e) {
                // closed
            }
            quit.countDown();
        }, "parent-watch");
        orphan.setDaemon(true);
        orphan.start();
        System.out.println("READY " + n.localPort());
        System.out.flush();
        quit.await();
        Thread.sleep(200); // the last answer leaves before the node closes
        n.close();
        System.exit(0);
    }
}
