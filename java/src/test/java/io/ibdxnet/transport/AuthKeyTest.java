package io.ibdxnet.transport;

import static io.ibdxnet.TestSupport.bytesOf;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.ibdxnet.DXNet;
import io.ibdxnet.DXNetConfig;
import io.ibdxnet.app.BytesRequest;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** Loading the pre-shared key: where it comes from, what is refused, and that it never shows. */
public class AuthKeyTest {
    static final String KEY = "sixteen bytes and more";

    @Rule
    public final Timeout timeout = Timeout.seconds(30);

    private static Path file(String content, String perms) throws Exception {
        Path f = Files.createTempFile("dxnet-key", ".txt");
        f.toFile().deleteOnExit();
        Files.write(f, content.getBytes(StandardCharsets.UTF_8));
        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString(perms));
        return f;
    }

    private static String refused(String file, String env) {
        try {
            AuthKey.load(file, env);
            fail("accepted: file " + file);
            return null;
        } catch (IllegalArgumentException e) {
            assertTrue("the key leaked into: " + e.getMessage(), !e.getMessage().contains(KEY) && !e.getMessage().contains("short"));
            return e.getMessage();
        }
    }

    private static byte[] hmac(AuthKey k) {
        return k.newMac().doFinal(new byte[] {1, 2, 3});
    }

    private static byte[] hmac(String key) throws Exception {
        Mac m = Mac.getInstance("HmacSHA256");
        m.init(new SecretKeySpec(key.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        return m.doFinal(new byte[] {1, 2, 3});
    }

    @Test
    public void theFileWinsOverTheEnvironmentAndTrailingWhitespaceIsTrimmed() throws Exception {
        Path f = file(KEY + " \t\r\n", "rw-------");
        AuthKey k = AuthKey.load(f.toString(), "an environment key of length");
        assertArrayEquals(hmac(KEY), hmac(k));
        AuthKey e = AuthKey.load(null, KEY + "\n");
        assertArrayEquals(hmac(KEY), hmac(e));
        assertNull(AuthKey.load(null, null));
        assertTrue(k.toString(), k.toString().contains(f.toString()) && !k.toString().contains(KEY));
        assertTrue(e.toString(), e.toString().contains(AuthKey.ENV) && !e.toString().contains(KEY));
        // Owner read-only is fine too.
        AuthKey.load(file(KEY, "r--------").toString(), null);
    }

    @Test
    public void aShortKeyIsAConfigErrorNamingWhereItCameFrom() throws Exception {
        Path f = file("short key\n      ", "rw-------");
        String m = refused(f.toString(), null);
        assertTrue(m, m.contains("authKeyFile") && m.contains(f.toString()) && m.contains("9 bytes") && m.contains("16"));
        m = refused(null, "short");
        assertTrue(m, m.contains(AuthKey.ENV) && m.contains("16"));
    }

    @Test
    public void aFileOthersMayReadOrWriteIsRefusedNamingItsPermissions() throws Exception {
        for (String perms : new String[] {"rw-r-----", "rw----r--", "rw--w----", "rw-----w-", "rwx---r-x"}) {
            Path f = file(KEY, perms);
            String m = refused(f.toString(), null);
            assertTrue(m, m.contains(f.toString()) && m.contains(perms) && m.contains("authKeyFile"));
        }
    }

    @Test
    public void aMissingFileIsRefusedNamingIt() throws Exception {
        Path f = Files.createTempDirectory("dxnet-key").resolve("nope.key");
        String m = refused(f.toString(), KEY);
        assertTrue(m, m.contains(f.toString()) && m.contains("does not exist"));
    }

    @Test
    public void startingANodeWithABadKeyFailsBeforeAnyThreadStarts() throws Exception {
        Path f = file(KEY, "rw-r--r--");
        int before = dxnetThreads().size();
        for (String transport : new String[] {"nio", "ib"}) {
            DXNetConfig c = new DXNetConfig(0);
            c.transport = transport;
            c.listen = "127.0.0.1:0";
            c.authKeyFile = f.toString();
            try {
                DXNet.start(c).close();
                fail("started with a world-readable key file over " + transport);
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage(), e.getMessage().contains(f.toString()) && e.getMessage().contains("rw-r--r--"));
            }
        }
        assertEquals(dxnetThreads().toString(), before, dxnetThreads().size());
    }

    /** ib on sim: the key reaches the native control plane; keyed nodes talk, a keyed and an unkeyed one refuse each other. */
    @Test
    public void ibNodesUseTheKeyForTheirControlPlane() throws Exception {
        Path key = file(KEY, "rw-------");
        io.ibdxnet.DXNet a = ibNode(0, key);
        io.ibdxnet.DXNet b = ibNode(1, key);
        io.ibdxnet.DXNet plain = ibNode(2, null);
        try {
            a.addNode(1, "127.0.0.1:" + b.localPort());
            b.addNode(0, "127.0.0.1:" + a.localPort());
            a.addNode(2, "127.0.0.1:" + plain.localPort());
            plain.addNode(0, "127.0.0.1:" + a.localPort());
            java.util.concurrent.atomic.AtomicInteger got = new java.util.concurrent.atomic.AtomicInteger();
            b.register(BytesRequest.TYPE, m -> got.incrementAndGet());
            a.sendMessage(new BytesRequest(1, bytesOf(new long[] {1})));
            long end = System.nanoTime() + 10_000_000_000L;
            while (got.get() == 0 && System.nanoTime() < end) {
                Thread.sleep(5);
            }
            assertEquals(1, got.get());
            assertTrue(a.transportStats().toString(), a.transportStats().get("auth_instances_admitted") >= 1);
            try {
                plain.sendMessage(new BytesRequest(0, bytesOf(new long[] {1})));
                fail("an unkeyed node connected to a keyed one");
            } catch (io.ibdxnet.NetworkException e) {
                assertTrue(e.getMessage(), e.getMessage().contains("node 0") || e.getMessage().contains("0x0000"));
                assertTrue(e.getMessage(), e.getMessage().contains("authentication"));
                assertEquals(io.ibdxnet.FailureReason.REFUSED, e.reason());
            }
        } finally {
            plain.close();
            b.close();
            a.close();
        }
    }

    private static io.ibdxnet.DXNet ibNode(int id, Path key) throws Exception {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = "ib";
        c.listen = "127.0.0.1:0";
        c.connectTimeoutMs = 3_000;
        c.nativeConfig.put("fabric", "sim");
        c.nativeConfig.put("listen", "127.0.0.1:0");
        c.nativeConfig.put("parking_yield_after_ms", "0");
        c.authKeyFile = key == null ? null : key.toString();
        io.ibdxnet.DXNet n = io.ibdxnet.DXNet.start(c);
        n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        return n;
    }

    @Test
    public void theConfigFileNamesTheKeyFileAndTheAddressCheck() throws Exception {
        Path key = file(KEY, "rw-------");
        Path conf = Files.createTempFile("dxnet", ".conf");
        conf.toFile().deleteOnExit();
        Files.write(conf, ("nodeId=1\ntransport=nio\ncheckPeerAddress=false\nauthKeyFile=" + key + "\n").getBytes(StandardCharsets.UTF_8));
        DXNetConfig c = DXNetConfig.load(conf);
        assertEquals(key.toString(), c.authKeyFile);
        assertTrue(!c.checkPeerAddress);
        c.validate();
        assertTrue(new DXNetConfig(2).checkPeerAddress);
        Files.write(conf, "nodeId=1\ncheckPeerAddress=yes\n".getBytes(StandardCharsets.UTF_8));
        try {
            DXNetConfig.load(conf);
            fail("checkPeerAddress=yes accepted");
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("checkPeerAddress"));
        }
    }

    private static List<String> dxnetThreads() {
        List<String> names = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("dxnet-")) {
                names.add(t.getName());
            }
        }
        return names;
    }

    /**
     * A FIFO, a directory or a device as authKeyFile fails the start at once
     * with a message naming the file and why (a FIFO blocked the start until
     * someone wrote to it); the node start is run on its own thread and must
     * end within 5 s.
     */
    @Test
    public void onlyARegularFileIsAKeyFile() throws Exception {
        Path dir = Files.createTempDirectory("dxnet-key");
        Path fifo = dir.resolve("fifo");
        Process p = new ProcessBuilder("mkfifo", "-m", "600", fifo.toString()).inheritIO().start();
        assertEquals("mkfifo", 0, p.waitFor());
        try {
            Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
            String[][] cases = {{fifo.toString(), "a FIFO, socket or device"}, {dir.toString(), "a directory"},
                {"/dev/zero", "a FIFO, socket or device"}};
            for (String[] c : cases) {
                DXNetConfig config = new DXNetConfig(0);
                config.transport = "nio";
                config.listen = "127.0.0.1:0";
                config.authKeyFile = c[0];
                java.util.concurrent.CompletableFuture<String> start = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                    try {
                        DXNet.start(config).close();
                        return "started";
                    } catch (IllegalArgumentException e) {
                        return e.getMessage();
                    } catch (Exception e) {
                        return e.toString();
                    }
                });
                String m = start.get(5, java.util.concurrent.TimeUnit.SECONDS);
                assertTrue(m, m.contains("authKeyFile '" + c[0] + "' is not a regular file (" + c[1] + ")"));
            }
        } finally {
            Files.deleteIfExists(fifo);
            Files.deleteIfExists(dir);
        }
    }

    /** A key file larger than 64 KiB is refused before it is read (a 1 GiB file was read whole). */
    @Test
    public void aHugeKeyFileIsRefusedUnread() throws Exception {
        Path f = file(KEY, "rw-------");
        try (java.io.RandomAccessFile r = new java.io.RandomAccessFile(f.toFile(), "rw")) {
            r.setLength(1L << 30); // sparse: 1 GiB that costs no disk
        }
        long before = ((com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean())
                .getCurrentThreadAllocatedBytes();
        String m = refused(f.toString(), null);
        long bytes = ((com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean())
                .getCurrentThreadAllocatedBytes() - before;
        assertTrue(m, m.contains("has 1073741824 bytes: a key file must have at most 65536"));
        assertTrue("refusing allocated " + bytes + " bytes", bytes < 1 << 20);
        // 64 KiB exactly is still a key file.
        try (java.io.RandomAccessFile r = new java.io.RandomAccessFile(f.toFile(), "rw")) {
            r.setLength(64 << 10);
        }
        AuthKey.load(f.toString(), null);
        Files.delete(f);
    }
}
