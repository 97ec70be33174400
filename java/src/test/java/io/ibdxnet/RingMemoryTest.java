package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.memory.FilePages;
import io.ibdxnet.memory.Pages;
import java.util.List;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The memory of a connection's ring (nioRingSize, taken when it opens).
 *
 * <p>In direct memory (JDK 17–21 without a tmpfs for file rings, or with
 * them turned off: {@code -Dibdxnet.ringDirectory=}), a ring larger than the
 * JVM's direct memory fails the send with a NetworkException naming
 * nioRingSize, the size and the limit, not a bare OutOfMemoryError, and the
 * node goes on. Run in a child JVM with {@code -XX:MaxDirectMemorySize=48m}
 * (the receive pools start with 1 MiB each, a ring would need 64 MiB). With
 * rings that follow use — mapped (JDK 22+) or a file in /dev/shm (JDK 17–21,
 * {@code RingMemory}) — the direct-memory limit does not apply to rings:
 * the same sends go out (a mapping the kernel refuses is
 * {@code RingReleaseTest.aRingThatCannotBeMappedSaysWhatAndHowLarge}, a full
 * tmpfs {@code RingFileTest.aFullTmpfsFailsTheSendNamingTheKeyAndReservesNothing}).
 *
 * <p>Idle connections cost the pages their rings had written, not
 * nioRingSize each, with rings that follow use; nioRingSize each without.
 */
public class RingMemoryTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    /** True if this JVM's rings follow use: mapped, or files in a tmpfs with room (as a child JVM's would be). */
    private static boolean ringsFollowUse() {
        java.nio.file.Path dir = FilePages.directory();
        return Pages.available() || dir != null && FilePages.room(dir) >= 1L << 30;
    }

    @Test
    public void aRingTheJvmCannotHoldFailsTheSendNamingTheKey() throws Exception {
        String refusal = ": NetworkException: the ring of the connection to node 1 (nioRingSize = 67108864) needs "
                + "67108864 bytes of direct memory; this JVM allows 50331648";
        ChildJvm.Result r = ChildJvm.run(Child.class, List.of("-XX:MaxDirectMemorySize=48m"), List.of(), 60_000);
        ChildJvm.Result off = ChildJvm.run(Child.class,
                List.of("-XX:MaxDirectMemorySize=48m", "-D" + FilePages.DIRECTORY_PROPERTY + "="), List.of(), 60_000);
        assertEquals(r.output, 0, r.exit);
        assertEquals(off.output, 0, off.exit);
        for (String transport : new String[] {"loopback", "nio"}) {
            if (ringsFollowUse()) {
                assertTrue(r.output, r.output.contains(transport + ": sent"));
            } else {
                assertTrue(r.output, r.output.contains(transport + refusal));
            }
            if (Pages.available()) {
                assertTrue(off.output, off.output.contains(transport + ": sent"));
            } else {
                assertTrue(off.output, off.output.contains(transport + refusal));
                assertTrue(off.output, off.output.contains("; not in a file either: file rings are off (-D"
                        + FilePages.DIRECTORY_PROPERTY + " is empty)"));
            }
        }
    }

    private static final int IDLE_RINGS = 8;
    private static final int IDLE_RING_SIZE = 16 << 20;

    @Test
    public void idleConnectionsCostTheirRingsOnlyWhenRingsCannotFollowUse() throws Exception {
        ChildJvm.Result r = ChildJvm.run(IdleChild.class,
                List.of("-Xms64m", "-Xmx64m", "-XX:+AlwaysPreTouch", "-XX:MaxDirectMemorySize=512m"), List.of(), 90_000);
        String text = r.output;
        assertEquals(text, 0, r.exit);
        long rings = (long) IDLE_RINGS * IDLE_RING_SIZE;
        long grew = (value(text, "rss_after_kb") - value(text, "rss_before_kb")) * 1024;
        boolean follow = ringsFollowUse();
        for (String transport : new String[] {"loopback", "nio"}) {
            long busy = value(text, transport + "_resident_busy");
            long idle = value(text, transport + "_resident_idle");
            if (follow) {
                assertTrue(text, busy > 0 && busy <= rings / 64); // a page (mapped) or 16 KiB (a file) of each ring
                assertEquals(text, 0, idle);
            } else {
                assertEquals(text, rings, busy);
                assertEquals(text, rings, idle);
            }
        }
        if (follow) {
            assertTrue(text, grew < rings / 8);
        } else {
            assertTrue(text, grew >= rings * 2 * 9 / 10); // both transports' rings, zeroed: resident in full
        }
    }

    private static long value(String text, String key) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(?m)\\b" + key + "=(-?\\d+)").matcher(text);
        assertTrue(key + " in " + text, m.find());
        return Long.parseLong(m.group(1));
    }

    /**
     * Per transport, node 0 sends one message to each of {@link #IDLE_RINGS}
     * other nodes (a ring of {@link #IDLE_RING_SIZE} each), then stays idle
     * past the release period; prints the rings' resident bytes busy and idle
     * and the process's resident set before the rings and at the end.
     */
    public static final class IdleChild {
        public static void main(String[] args) throws Exception {
            List<DXNet> all = new java.util.ArrayList<>();
            try {
                java.util.Map<String, List<DXNet>> byTransport = new java.util.LinkedHashMap<>();
                java.util.concurrent.atomic.AtomicInteger received = new java.util.concurrent.atomic.AtomicInteger();
                for (String transport : new String[] {"loopback", "nio"}) {
                    List<DXNet> n = new java.util.ArrayList<>();
                    for (int i = 0; i <= IDLE_RINGS; i++) {
                        DXNetConfig c = new DXNetConfig(i);
                        c.transport = transport;
                        c.listen = "127.0.0.1:0";
                        c.nioRingSize = IDLE_RING_SIZE;
                        DXNet d = DXNet.start(c);
                        d.register(BytesMessage.class, m -> received.incrementAndGet());
                        n.add(d);
                        all.add(d);
                    }
                    for (int i = 1; i <= IDLE_RINGS; i++) {
                        n.get(0).addNode(i, "127.0.0.1:" + n.get(i).localPort());
                        n.get(i).addNode(0, "127.0.0.1:" + n.get(0).localPort()); // nio admits known nodes only
                    }
                    byTransport.put(transport, n);
                }
                System.gc();
                Thread.sleep(500);
                System.out.println("rss_before_kb=" + rssKb());
                for (java.util.Map.Entry<String, List<DXNet>> e : byTransport.entrySet()) {
                    DXNet sender = e.getValue().get(0);
                    int before = received.get();
                    for (int i = 1; i <= IDLE_RINGS; i++) {
                        sender.sendMessage(new BytesMessage(i, new byte[64]));
                    }
                    long until = System.nanoTime() + 20_000_000_000L;
                    while (received.get() < before + IDLE_RINGS && System.nanoTime() - until < 0) {
                        Thread.sleep(1);
                    }
                    System.out.println(e.getKey() + "_resident_busy=" + sender.transportStats().get("ring_bytes_resident"));
                }
                Thread.sleep(2_000); // past the release period (1 s) and the housekeeping after it
                for (java.util.Map.Entry<String, List<DXNet>> e : byTransport.entrySet()) {
                    System.out.println(e.getKey() + "_resident_idle="
                            + e.getValue().get(0).transportStats().get("ring_bytes_resident"));
                }
                System.out.println("rss_after_kb=" + rssKb());
            } finally {
                for (DXNet d : all) {
                    d.close();
                }
            }
        }

        private static long rssKb() throws java.io.IOException {
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
            throw new IllegalStateException("no VmRSS");
        }
    }

    /** Two nodes with 64 MiB rings in a JVM of 48 MiB direct memory; prints what a send does. */
    public static final class Child {
        public static void main(String[] args) throws Exception {
            for (String transport : new String[] {"loopback", "nio"}) {
                DXNet[] n = new DXNet[2];
                try {
                    for (int i = 0; i < 2; i++) {
                        DXNetConfig c = new DXNetConfig(i);
                        c.transport = transport;
                        c.listen = "127.0.0.1:0";
                        c.nioRingSize = 64 << 20;
                        c.nioBufferCount = 256; // pools of up to 16 MiB each
                        n[i] = DXNet.start(c);
                    }
                    n[0].addNode(1, "127.0.0.1:" + n[1].localPort());
                    n[1].addNode(0, "127.0.0.1:" + n[0].localPort()); // nio admits known nodes only
                    try {
                        n[0].sendMessage(new BytesMessage(1, new byte[8]));
                        System.out.println(transport + ": sent");
                    } catch (NetworkException e) {
                        System.out.println(transport + ": NetworkException: " + e.getMessage());
                    }
                } finally {
                    for (DXNet d : n) {
                        if (d != null) {
                            d.close();
                        }
                    }
                }
            }
        }
    }
}
