package io.ibdxnet.netns;

import io.ibdxnet.ChildJvm;
import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A host of its own for a test: a Linux network namespace (loopback up) that
 * processes run in, joined to other such hosts by veth pairs
 * ({@link #link}), so that a peer's address is a real other host's address,
 * not a 127.0.0.x alias.
 *
 * <p>Addresses come from the documentation ranges 192.0.2.0/24 and
 * 198.51.100.0/24 and exist only inside the namespaces made here: a link is
 * created straight into its two namespaces, nothing is added to the test
 * JVM's own namespace (whose interfaces may use those ranges themselves: on
 * this project's machines {@code eth0} is in 192.0.2.0/24). Each link is a
 * /30 of its own; namespaces are named {@code ibx-<pid>-<n>}, so concurrent
 * runs never meet. The test JVM reaches the processes through their standard
 * streams, not the network.
 *
 * <p>Use: {@code Assume.assumeTrue(NetnsHost.unavailableReason(), NetnsHost.available())},
 * then {@code try (NetnsHost a = NetnsHost.create(); NetnsHost b = NetnsHost.create())},
 * {@code String[] ab = NetnsHost.link(a, b)} (a's address, b's address), and
 * {@link #startJava} for a main of the test classpath inside one. {@link #close}
 * (also run by a shutdown hook) kills what was started inside and deletes the
 * namespace, which deletes its links.
 */
public final class NetnsHost implements AutoCloseable {
    private static final String PID = Long.toString(ManagementFactory.getRuntimeMXBean().getPid());
    private static final AtomicInteger NAMES = new AtomicInteger();
    /** /30 subnets handed out (four addresses each), across both ranges. */
    private static final AtomicInteger SUBNETS = new AtomicInteger();
    private static final List<NetnsHost> LIVE = Collections.synchronizedList(new ArrayList<>());
    private static volatile String unavailable;
    private static volatile boolean probed;

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (NetnsHost h : new ArrayList<>(LIVE)) {
                h.close();
            }
        }, "netns-cleanup"));
    }

    private final String name;
    private final List<Process> processes = Collections.synchronizedList(new ArrayList<>());
    private final AtomicInteger links = new AtomicInteger();
    private boolean closed;

    private NetnsHost(String name) {
        this.name = name;
    }

    /** True if namespaces can be made here (root, {@code ip}, a kernel that allows it); probed once. */
    public static synchronized boolean available() {
        if (!probed) {
            probed = true;
            unavailable = probe();
        }
        return unavailable == null;
    }

    /** Why {@link #available} is false (for {@code Assume}), or a note that it is not. */
    public static String unavailableReason() {
        available();
        return unavailable == null ? "network namespaces are available" : "no network namespaces here: " + unavailable;
    }

    private static String probe() {
        if (!new File("/proc/self/ns/net").exists()) {
            return "the kernel has no network namespaces";
        }
        try {
            Run id = run(Arrays.asList("id", "-u"));
            if (!id.output.trim().equals("0")) {
                return "not root (uid " + id.output.trim() + ")";
            }
        } catch (IOException e) {
            return "cannot run id: " + e.getMessage();
        }
        reapLeftovers();
        try (NetnsHost a = create(); NetnsHost b = create()) {
            link(a, b);
            return null;
        } catch (IOException | RuntimeException e) {
            return e.getMessage();
        }
    }

    /**
     * Deletes namespaces a killed earlier run left ({@code ibx-<pid>-<n>} whose
     * JVM is gone), with what still runs in them: a namespace lives on while a
     * process is in it.
     */
    private static void reapLeftovers() {
        try {
            for (String line : run(Arrays.asList("ip", "netns", "list")).output.split("\n")) {
                java.util.regex.Matcher m = java.util.regex.Pattern.compile("^(ibx-(\\d+)-\\d+)\\b").matcher(line.trim());
                if (m.find() && !new File("/proc/" + m.group(2)).exists()) {
                    new NetnsHost(m.group(1)).close();
                }
            }
        } catch (IOException e) {
            // nothing to reap, or no ip: the probe says so next
        }
    }

    /** A new namespace with its loopback up. */
    public static NetnsHost create() throws IOException {
        NetnsHost h = new NetnsHost("ibx-" + PID + "-" + NAMES.incrementAndGet());
        check(Arrays.asList("ip", "netns", "add", h.name));
        LIVE.add(h);
        try {
            check(Arrays.asList("ip", "-n", h.name, "link", "set", "lo", "up"));
        } catch (IOException e) {
            h.close();
            throw e;
        }
        return h;
    }

    /**
     * Joins {@code a} and {@code b} by a veth pair with a /30 of their own;
     * returns {a's address, b's address}.
     */
    public static String[] link(NetnsHost a, NetnsHost b) throws IOException {
        int subnet = SUBNETS.getAndIncrement() % 128;
        String base = subnet < 64 ? "198.51.100." : "192.0.2.";
        int first = (subnet % 64) * 4;
        String[] addr = {base + (first + 1), base + (first + 2)};
        String ia = "v" + a.links.getAndIncrement();
        String ib = "v" + b.links.getAndIncrement();
        check(Arrays.asList("ip", "link", "add", ia, "netns", a.name, "type", "veth", "peer", "name", ib, "netns", b.name));
        check(Arrays.asList("ip", "-n", a.name, "addr", "add", addr[0] + "/30", "dev", ia));
        check(Arrays.asList("ip", "-n", b.name, "addr", "add", addr[1] + "/30", "dev", ib));
        check(Arrays.asList("ip", "-n", a.name, "link", "set", ia, "up"));
        check(Arrays.asList("ip", "-n", b.name, "link", "set", ib, "up"));
        return addr;
    }

    public String name() {
        return name;
    }

    /** {@code command} to run inside this namespace. */
    public ProcessBuilder command(List<String> command) {
        List<String> all = new ArrayList<>(Arrays.asList("ip", "netns", "exec", name));
        all.addAll(command);
        return new ProcessBuilder(all);
    }

    /**
     * Starts {@code main} of the test classpath in a JVM inside this
     * namespace, with {@code ulimit -n fdLimit} (a flood of sockets needs
     * more than CI's default 1024), stdout and stderr into its log.
     * Killed by {@link #close}.
     */
    public ChildJvm startJava(Class<?> main, int fdLimit, List<String> jvmArgs, List<String> args) throws IOException {
        String classes = ChildJvm.testClasspath();
        // "$0" "$@": the JVM's arguments pass through the shell unquoted and unchanged.
        List<String> cmd = new ArrayList<>(Arrays.asList("sh", "-c", "ulimit -n " + fdLimit + " && exec \"$0\" \"$@\"",
                System.getProperty("java.home") + "/bin/java", "-cp", classes,
                "-Djava.library.path=" + System.getProperty("java.library.path", "")));
        cmd.addAll(jvmArgs);
        cmd.add(main.getName());
        cmd.addAll(args);
        ChildJvm c = ChildJvm.start(command(cmd).command(), Map.of());
        processes.add(c.process());
        return c;
    }

    /** Kills what was started here (and anything left in the namespace), then deletes it and its links. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        synchronized (processes) {
            for (Process p : processes) {
                p.destroyForcibly();
            }
            for (Process p : processes) {
                try {
                    p.waitFor(5, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
        try {
            // Children of what we started: a namespace lives on while a process is in it.
            Run pids = run(Arrays.asList("ip", "netns", "pids", name));
            for (String pid : pids.output.trim().split("\\s+")) {
                if (!pid.isEmpty()) {
                    run(Arrays.asList("kill", "-9", pid));
                }
            }
            run(Arrays.asList("ip", "netns", "del", name));
        } catch (IOException e) {
            // best effort: the shutdown hook or the next run's operator sees the leftover name
        }
        LIVE.remove(this);
    }

    private static final class Run {
        final int exit;
        final String output;

        Run(int exit, String output) {
            this.exit = exit;
            this.output = output;
        }
    }

    private static Run run(List<String> cmd) throws IOException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        try {
            byte[] out = readAll(p);
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IOException(String.join(" ", cmd) + ": no exit within 10 s");
            }
            return new Run(p.exitValue(), new String(out, StandardCharsets.UTF_8));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted: " + String.join(" ", cmd), e);
        }
    }

    private static byte[] readAll(Process p) throws IOException {
        return p.getInputStream().readAllBytes();
    }

    private static void check(List<String> cmd) throws IOException {
        Run r = run(cmd);
        if (r.exit != 0) {
            throw new IOException(String.join(" ", cmd) + " failed (" + r.exit + "): " + r.output.trim());
        }
    }

    /** Test helper: the text a process wrote to {@code log} so far. */
    public static String read(File log) throws IOException {
        return new String(Files.readAllBytes(log.toPath()), StandardCharsets.UTF_8);
    }
}
