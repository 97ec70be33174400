package io.ibdxnet;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Ports a test binds later (a node's listen address given before it starts,
 * or an address where nobody listens). A port found with a bind to port 0 and
 * closed again comes from the kernel's ephemeral range, where any outgoing
 * connection may take it before the test binds it: with the JDK 17 and JDK 25
 * suites side by side (./ibdxnet test), a node once failed to start with
 * "Address already in use". These ports lie outside the ephemeral range, and
 * each is reserved against every other test JVM on the host by a lock on a
 * file of its own, held until this JVM exits.
 */
public final class TestPorts {
    private TestPorts() {}

    /** The lock files this JVM holds (one per port it handed out). */
    private static final List<FileChannel> HELD = new ArrayList<>();
    private static int next = -1;

    /** A port free for TCP and UDP on every address now, and reserved for this JVM. */
    public static synchronized int freePort() throws IOException {
        int[] range = range();
        int size = range[1] - range[0];
        if (next < 0) {
            next = range[0] + (int) (ProcessHandle.current().pid() * 7919 % size);
        }
        Path dir = Paths.get(System.getProperty("java.io.tmpdir"), "ibdxnet-test-ports");
        Files.createDirectories(dir);
        for (int tried = 0; tried < size; tried++) {
            int port = next;
            next = next + 1 < range[1] ? next + 1 : range[0];
            FileChannel ch = FileChannel.open(dir.resolve(Integer.toString(port)), StandardOpenOption.CREATE,
                    StandardOpenOption.WRITE);
            FileLock lock;
            try {
                lock = ch.tryLock();
            } catch (OverlappingFileLockException e) {
                lock = null; // ours already
            }
            if (lock != null && bindable(port)) {
                HELD.add(ch);
                return port;
            }
            ch.close();
        }
        throw new IOException("no free port in [" + range[0] + ", " + range[1] + ")");
    }

    private static boolean bindable(int port) {
        try (ServerSocket s = new ServerSocket(); DatagramSocket d = new DatagramSocket(null)) {
            s.bind(new InetSocketAddress(port));
            d.bind(new InetSocketAddress(port));
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** Up to 12 000 ports just below the kernel's ephemeral range (or above it, if too little is below). */
    private static int[] range() {
        int low = 32768, high = 60999;
        try {
            // A reader, not Files.readString: /proc reports a size of 0, and readString read one byte of it.
            String[] r;
            try (java.io.BufferedReader in = Files.newBufferedReader(Paths.get("/proc/sys/net/ipv4/ip_local_port_range"))) {
                r = in.readLine().trim().split("\\s+");
            }
            low = Integer.parseInt(r[0]);
            high = Integer.parseInt(r[1]);
        } catch (IOException | RuntimeException e) {
            // not Linux: the defaults
        }
        if (low > 12_000) {
            return new int[] {Math.max(1024, low - 12_000), low};
        }
        return new int[] {high + 1, Math.min(65536, high + 1 + 12_000)};
    }
}
