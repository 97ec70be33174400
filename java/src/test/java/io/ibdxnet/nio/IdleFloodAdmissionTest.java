package io.ibdxnet.nio;

import static org.junit.Assert.assertTrue;

import io.ibdxnet.ChildJvm;
import io.ibdxnet.TestSupport;
import io.ibdxnet.netns.IdleSocketFlood;
import io.ibdxnet.netns.NetnsHost;
import io.ibdxnet.netns.NetnsNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.After;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Admission before resources, across real hosts: node 0 (namespace V) is
 * flooded with {@link #SOCKETS} idle connections by a process in namespace H,
 * an address its node table does not hold, reopening each one closed; node 1
 * (namespace K, in the table) must get a request answered within 1 s, and
 * again within 1 s after a restart (SIGKILL, new process), with and without
 * the pre-shared key; and with the flood on node 1's own host (its address).
 * The same steps without a flood give the baseline (a fresh JVM's first request). Each step prints a {@code figure} line (the bench
 * results quote them).
 */
public class IdleFloodAdmissionTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(3);

    static final int SOCKETS = 1_000;
    /** The flood reopens a closed connection this much later (a refused one, at once, would be a SYN flood). */
    static final int REOPEN_MS = 100;
    static final int PORT = 5000;
    static final long LIMIT_MS = 1_000;

    private final List<NetnsHost> hosts = new ArrayList<>();

    @After
    public void cleanUp() {
        for (NetnsHost h : hosts) {
            h.close();
        }
    }

    private NetnsHost host() throws IOException {
        NetnsHost h = NetnsHost.create();
        hosts.add(h);
        return h;
    }

    /** Where the flood comes from. */
    enum Flood { NONE, STRANGER, PEERS_HOST }

    @Test
    public void baselineWithoutAFloodUnkeyed() throws Exception {
        run(null, Flood.NONE);
    }

    @Test
    public void baselineWithoutAFloodKeyed() throws Exception {
        run(NioTrustFixture.keyFile(NioTrustFixture.KEY), Flood.NONE);
    }

    @Test
    public void aKnownNodeConnectsThroughAThousandIdleSocketsUnkeyed() throws Exception {
        run(null, Flood.STRANGER);
    }

    @Test
    public void aKnownNodeConnectsThroughAThousandIdleSocketsKeyed() throws Exception {
        run(NioTrustFixture.keyFile(NioTrustFixture.KEY), Flood.STRANGER);
    }

    /**
     * The flood runs on node 1's own host (same address, no key): it can hold
     * only that address's few slots, and an honest hello displaces them.
     */
    @Test
    public void aKnownNodeConnectsThroughAThousandIdleSocketsFromItsOwnAddressKeyed() throws Exception {
        run(NioTrustFixture.keyFile(NioTrustFixture.KEY), Flood.PEERS_HOST);
    }

    private void run(Path key, Flood from) throws Exception {
        Assume.assumeTrue(NetnsHost.unavailableReason(), NetnsHost.available());
        String keyArg = key == null ? "-" : key.toString();
        String mode = (key == null ? "unkeyed" : "keyed") + ", flood: " + from;
        NetnsHost v = host();
        NetnsHost k = host();
        NetnsHost h = from == Flood.PEERS_HOST ? k : host();
        String[] vk = NetnsHost.link(v, k);
        String[] vh = from == Flood.PEERS_HOST ? vk : NetnsHost.link(v, h);
        Node victim = new Node(v, "victim", "0", "0.0.0.0:" + PORT, keyArg, "1=" + vk[1] + ":" + PORT);
        long victimStart = System.nanoTime();
        ChildJvm flooder = null;
        if (from != Flood.NONE) {
            flooder = h.startJava(IdleSocketFlood.class, 8192, jvm(), Arrays.asList(vh[0], Integer.toString(PORT),
                    Integer.toString(SOCKETS), Integer.toString(REOPEN_MS)));
            // Flooding: every socket was opened at least once, and for a while.
            long floodStart = System.nanoTime();
            awaitFlood(flooder);
            Thread.sleep(Math.max(0, 1_000 - (System.nanoTime() - floodStart) / 1_000_000));
        }
        String flood = lastFloodLine(flooder);
        // The first start, then a restart (SIGKILL, a new process): both measured before judging.
        List<Matcher> pings = new ArrayList<>();
        for (int start = 1; start <= 2; start++) {
            Node peer = new Node(k, "peer" + start, "1", vk[1] + ":" + PORT, keyArg, "0=" + vk[0] + ":" + PORT);
            Matcher m = peer.ask("ping 0 5000", Pattern.compile("(answered|unanswered) 0 ms=(\\d+) attempts=(\\d+)(.*)"));
            System.out.println("figure " + mode + " start " + start + ": " + m.group() + " | " + flood);
            pings.add(m);
            peer.kill();
            flood = lastFloodLine(flooder);
        }
        Matcher stats = victim.ask("stats", Pattern.compile("stats \\{.*\\}"));
        System.out.println("figure " + mode + " victim: " + stats.group());
        // SYNs the victim's kernel dropped (accept queue full), and how busy the machine was.
        String dropped;
        try {
            Process drops = v.command(Arrays.asList("nstat", "-asz", "TcpExtListenOverflows", "TcpExtListenDrops"))
                    .redirectErrorStream(true).start();
            dropped = new String(drops.getInputStream().readAllBytes(), StandardCharsets.UTF_8).replaceAll("\\s+", " ");
            drops.waitFor();
        } catch (IOException e) {
            dropped = "no nstat (" + e.getMessage() + ") ";
        }
        String load = new String(java.nio.file.Files.readAllBytes(java.nio.file.Paths.get("/proc/loadavg")),
                StandardCharsets.UTF_8).trim();
        System.out.println("figure " + mode + " victim kernel: " + dropped + "| loadavg " + load);
        for (int i = 0; i < pings.size(); i++) {
            Matcher m = pings.get(i);
            assertTrue(mode + ", start " + (i + 1) + " of the known node, flooded: " + m.group() + " | victim " + stats.group()
                    + " | kernel " + dropped + "| loadavg " + load,
                    m.group(1).equals("answered") && Long.parseLong(m.group(2)) <= LIMIT_MS);
        }
        // Thousands of refusals, one warning per kind per second at most.
        long seconds = (System.nanoTime() - victimStart) / 1_000_000_000L + 1;
        for (String kind : new String[] {"refused at accept", "closed for a newer connection"}) {
            long lines = countLines(victim.process.output(), kind);
            System.out.println("figure " + mode + " victim log: " + lines + " warnings '" + kind + "' in " + seconds + " s");
            assertTrue(lines + " warnings '" + kind + "' in " + seconds + " s", lines <= seconds);
        }
        if (from == Flood.PEERS_HOST) {
            assertTrue("the flood held its address's slots, displaced: " + stats.group(),
                    counter(stats.group(), "handshakes_displaced") >= SOCKETS - NioAdmission.PER_ADDRESS);
        } else if (from == Flood.STRANGER) {
            assertTrue("the flood was refused at accept: " + stats.group(),
                    counter(stats.group(), "accepts_refused_unknown_address") >= SOCKETS);
            assertTrue("no stranger took a handshake slot: " + stats.group(),
                    counter(stats.group(), "hellos_refused_timeout") == 0 && counter(stats.group(), "handshakes_displaced") == 0);
        }
        assertTrue("never all slots held: " + stats.group(), counter(stats.group(), "hellos_refused_busy") == 0);
    }

    static long countLines(String log, String containing) {
        long n = 0;
        for (String line : log.split("\n")) {
            if (line.startsWith("WARNING") && line.contains(containing)) {
                n++;
            }
        }
        return n;
    }

    static long counter(String stats, String name) {
        Matcher m = Pattern.compile("\\b" + name + "=(\\d+)").matcher(stats);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    private static List<String> jvm() {
        return Arrays.asList("-Xmx256m", "-XX:MaxDirectMemorySize=1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1");
    }

    private static void awaitFlood(ChildJvm flooder) throws Exception {
        Pattern p = Pattern.compile("flood open=(\\d+) connects=(\\d+)");
        TestSupport.waitFor("the flood opened every socket", 30_000, () -> {
            try {
                Matcher m = p.matcher(flooder.output());
                long connects = 0;
                while (m.find()) {
                    connects = Long.parseLong(m.group(2));
                }
                return connects >= SOCKETS;
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
    }

    private static String lastFloodLine(ChildJvm flooder) throws IOException {
        if (flooder == null) {
            return "no flood line";
        }
        String[] lines = flooder.output().split("\n");
        for (int i = lines.length - 1; i >= 0; i--) {
            if (lines[i].startsWith("flood ")) {
                return lines[i];
            }
        }
        return "no flood line";
    }

    /** A {@link NetnsNode} process. */
    private final class Node {
        final ChildJvm process;

        Node(NetnsHost where, String name, String... args) throws Exception {
            process = where.startJava(NetnsNode.class, 4096, jvm(), Arrays.asList(args[0], "nio", args[1], args[2],
                    args[3]));
            process.awaitLine(Pattern.compile("ready \\d+"), 30_000);
        }

        /** Writes {@code command}, returns the first line after it that matches {@code answer}. */
        Matcher ask(String command, Pattern answer) throws Exception {
            return process.ask(command, answer, 10_000);
        }

        void kill() throws InterruptedException {
            process.kill();
        }
    }
}
