package io.ibdxnet.nio;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.FairnessTest;
import io.ibdxnet.TestSupport;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.After;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * A peer that sends requests and never reads the replies ({@link FairnessPeer}
 * {@code flood}), in its own process and network namespace (its own address,
 * 198.51.100.6), against a node in a process of its own at {@code -Xmx512m};
 * four honest peers (this JVM, 127.0.0.1) run request/response throughout.
 * Requests arrive one by one (one handler batch each), as many as the old
 * shared handler queue's 16 384 batches within the test.
 */
public class NeverReadingPeerTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private final List<Process> processes = new ArrayList<>();
    private final AtomicInteger slowBack = new AtomicInteger();
    private final List<DXNet> honest = new ArrayList<>();
    private TestNamespace ns;

    @After
    public void cleanUp() throws Exception {
        for (DXNet n : honest) {
            n.close();
        }
        for (Process p : processes) {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
        if (ns != null) {
            ns.close();
        }
    }

    private static int freePort() throws Exception {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private Process java(List<String> prefix, String heap, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(prefix);
        cmd.addAll(Arrays.asList(new File(System.getProperty("java.home"), "bin/java").getPath(), heap, "-cp",
                System.getProperty("java.class.path"), "-Djava.library.path=" + System.getProperty("java.library.path"),
                FairnessPeer.class.getName()));
        cmd.addAll(Arrays.asList(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        processes.add(p);
        drain(p);
        return p;
    }

    /** Each process's output, drained as it comes (a full pipe would stall its logging threads). */
    private final java.util.Map<Process, java.util.concurrent.BlockingQueue<String>> output = new java.util.concurrent.ConcurrentHashMap<>();

    private void drain(Process p) {
        java.util.concurrent.BlockingQueue<String> lines = new java.util.concurrent.LinkedBlockingQueue<>();
        output.put(p, lines);
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    lines.add(line);
                }
            } catch (java.io.IOException e) {
                // the process ended
            }
            lines.add("<end of output>");
        });
        t.setDaemon(true);
        t.start();
    }

    private String await(Process p, String prefix) throws Exception {
        StringBuilder seen = new StringBuilder();
        while (true) {
            String line = output.get(p).poll(120, TimeUnit.SECONDS);
            if (line == null || line.equals("<end of output>")) {
                throw new AssertionError("no " + prefix + " line; output:\n" + seen);
            }
            if (line.startsWith(prefix)) {
                return line;
            }
            seen.append(line).append('\n');
        }
    }

    private static long percentile(List<Long> sorted, double p) {
        return sorted.get(Math.min(sorted.size() - 1, (int) (sorted.size() * p)));
    }

    /** Round trips of the honest peers for {@code ms}: their latencies in ns, failures counted. */
    private List<Long> measure(long ms, AtomicInteger failures) throws Exception {
        List<Long> rtts = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        for (DXNet n : honest) {
            Thread t = new Thread(() -> {
                byte[] payload = new byte[64];
                while (!stop.get()) {
                    long t0 = System.nanoTime();
                    java.nio.ByteBuffer.wrap(payload).putLong(t0);
                    try {
                        BytesResponse r = n.sendSync(new BytesRequest(0, payload), 10_000);
                        long back = System.nanoTime() - java.nio.ByteBuffer.wrap(r.bytes).getLong();
                        if (back > 20_000_000) {
                            slowBack.incrementAndGet();
                        }
                        rtts.add(System.nanoTime() - t0);
                    } catch (Exception e) {
                        failures.incrementAndGet();
                    }
                    try {
                        Thread.sleep(1); // request/response at a steady pace, not flat out
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        Thread.sleep(ms);
        stop.set(true);
        for (Thread t : threads) {
            t.join(15_000);
        }
        List<Long> sorted = new ArrayList<>(rtts);
        Collections.sort(sorted);
        return sorted;
    }

    @Test
    public void honestPeersKeepTheirLatencyBesideAPeerThatNeverReads() throws Exception {
        ns = TestNamespace.create(1);
        Assume.assumeTrue("no network namespace here: " + TestNamespace.whyNot(), ns != null);
        int serverPort = freePort();
        List<String> table = new ArrayList<>();
        table.add("1=" + ns.inside + ":40001");
        int[] honestPorts = new int[4];
        for (int i = 0; i < 4; i++) {
            honestPorts[i] = freePort();
            table.add((i + 2) + "=127.0.0.1:" + honestPorts[i]);
        }
        List<String> serverArgs = new ArrayList<>(Arrays.asList("server", "0", "0.0.0.0:" + serverPort));
        serverArgs.addAll(table);
        Process server = java(List.of(), "-Xmx512m", serverArgs.toArray(new String[0]));
        await(server, "READY");
        for (int i = 0; i < 4; i++) {
            DXNetConfig c = new DXNetConfig(i + 2);
            c.transport = "nio";
            c.listen = "127.0.0.1:" + honestPorts[i];
            c.nodes.put(0, "127.0.0.1:" + serverPort);
            DXNet n = DXNet.start(c);
            n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
            honest.add(n);
        }
        AtomicInteger failures = new AtomicInteger();
        measure(1_000, failures); // warm up
        List<Long> baseline = measure(FairnessTest.PHASE_MS * 3 / 2, failures);
        long floodSeconds = 2 + FairnessTest.PHASE_MS * 3 / 1000;
        Process flood = java(ns.exec(), "-Xmx256m", "flood", "1", ns.inside + ":40001", "0=" + ns.host + ":" + serverPort,
                "--", "0", String.valueOf(floodSeconds), "20");
        Thread.sleep(1_500); // its first replies fill its socket: from now on the node's replies find its window full
        List<Long> beside = measure(FairnessTest.PHASE_MS * 3, failures);
        String flooded = await(flood, "FLOODED");
        OutputStream in = server.getOutputStream();
        in.write("quit\n".getBytes(StandardCharsets.UTF_8));
        in.flush();
        String inway = await(server, "INWAY");
        String stats = await(server, "STATS");
        System.out.println("NEVER-READS " + inway + "; replies over 20 ms back: " + slowBack);
        String figures = String.format("honest RTT p50/p99 alone %d/%d µs, beside a peer that never reads %d/%d µs "
                + "(%d and %d round trips); honest failures %d; the peer: %s; node: %s",
                percentile(baseline, 0.5) / 1000, percentile(baseline, 0.99) / 1000, percentile(beside, 0.5) / 1000,
                percentile(beside, 0.99) / 1000, baseline.size(), beside.size(), failures.get(), flooded, stats);
        System.out.println("NEVER-READS " + figures);
        assertEquals(figures, 0, failures.get());
        assertTrue(figures, stats.contains("healthy=true"));
        assertTrue(figures, !stats.contains("replies_failed=0 "));
        // 2× the baseline p99, and at least 5 ms (a 2-core host with three JVMs).
        assertTrue(figures, percentile(beside, 0.99) <= Math.max(2 * percentile(baseline, 0.99), 5_000_000));
        // The backlog the peer left is bounded by its shares, not by what it sent (> 200 MB here).
        long live = Long.parseLong(stats.replaceAll(".*live_heap=(\\d+).*", "$1"));
        assertTrue(figures, live < 128L << 20);
    }
}
