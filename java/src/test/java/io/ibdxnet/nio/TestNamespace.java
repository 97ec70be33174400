package io.ibdxnet.nio;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A network namespace joined to this host by a veth pair, on a /30 of the
 * documentation range 198.51.100.0/24: subnet {@code k} puts the host side at
 * {@code 198.51.100.(4k+1)} and the namespace side at {@code .(4k+2)}. (Not
 * 192.0.2.0/24: these machines' own network may use it, eth0 here is
 * 192.0.2.2 with its gateway at 192.0.2.1.) Made and removed by the test
 * (root needed).
 */
final class TestNamespace implements AutoCloseable {
    private static String lastError = "";
    final String name;
    final String host;
    final String inside;
    private final String link;

    private TestNamespace(String name, String link, String host, String inside) {
        this.name = name;
        this.link = link;
        this.host = host;
        this.inside = inside;
    }

    /** A new namespace, or null where it cannot be made ({@link #whyNot}). */
    static TestNamespace create(int subnet) {
        long id = ProcessHandle.current().pid() % 100_000;
        String name = "ibdx" + id + "-" + subnet;
        String link = "vx" + id + "s" + subnet;
        TestNamespace ns = new TestNamespace(name, link, "198.51.100." + (4 * subnet + 1), "198.51.100." + (4 * subnet + 2));
        try {
            ns.close(); // a leftover of an earlier run of this pid
            run("ip", "netns", "add", name);
            run("ip", "link", "add", link, "type", "veth", "peer", "name", link + "p");
            run("ip", "link", "set", link + "p", "netns", name);
            run("ip", "addr", "add", ns.host + "/30", "dev", link);
            run("ip", "link", "set", link, "up");
            run("ip", "netns", "exec", name, "ip", "addr", "add", ns.inside + "/30", "dev", link + "p");
            run("ip", "netns", "exec", name, "ip", "link", "set", link + "p", "up");
            run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up");
            return ns;
        } catch (IOException | InterruptedException e) {
            lastError = e.getMessage();
            ns.close();
            return null;
        }
    }

    static String whyNot() {
        return lastError;
    }

    /** The prefix that runs a command inside the namespace. */
    List<String> exec() {
        return new ArrayList<>(Arrays.asList("ip", "netns", "exec", name));
    }

    private static void run(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        if (p.waitFor() != 0) {
            throw new IOException(String.join(" ", cmd) + ": " + out.trim());
        }
    }

    @Override
    public void close() {
        try {
            new ProcessBuilder("ip", "link", "del", link).redirectErrorStream(true).start().waitFor();
            new ProcessBuilder("ip", "netns", "del", name).redirectErrorStream(true).start().waitFor();
        } catch (IOException | InterruptedException e) {
            // nothing was made
        }
    }
}
