package io.ibdxnet;

import static io.ibdxnet.TestSupport.bytesOf;
import static io.ibdxnet.TestSupport.longsOf;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import io.ibdxnet.core.Frame;
import io.ibdxnet.core.FrameMutator;
import io.ibdxnet.internal.Transports;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;

/**
 * A peer that is allowed to connect sends random and mutated frames (hostile
 * lengths, totals, flags, fragments out of order, cut-short frames, payloads
 * that lie about their own contents) through the real receive path of a node
 * — over nio, and over ib on sim. After every case the node still answers an
 * honest node's request; at the end no thread has died, the heap is where it
 * was and every violation was counted. Cases per transport:
 * {@code test.fuzzCases} (CI: 50 000 each — most cases break the connection
 * and the peer reconnects, about 1 ms each; {@code ./ibdxnet bench fuzz}:
 * 500 000 each). {@link io.ibdxnet.core.StreamAssemblerViolationTest} runs
 * 10^5 cases through the assembler alone in CI (10^6 in the bench).
 */
@RunWith(Parameterized.class)
public class FrameFuzzTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(20);

    @Parameterized.Parameters(name = "{0}")
    public static Collection<Object[]> transports() {
        return Arrays.asList(new Object[][] {{"nio"}, {"ib"}});
    }

    @Parameterized.Parameter
    public String transport;

    // The echo request's type: random subtypes hit it (2) as well as the lengths message.
    private static final byte TYPE = BytesRequest.TYPE.type();
    /** A message type the victim knows whose payload is all length-prefixed (lying lengths are read). */
    private static final byte LENGTHS = 9;
    private final List<AutoCloseable> open = new ArrayList<>();

    /** Reads arrays and a string whose lengths the (hostile) payload gives. */
    public static final class LengthsMessage extends Message {
        public LengthsMessage() {
            super(TYPE, LENGTHS);
        }

        @Override
        protected void exportPayload(MessageExporter out) {}

        @Override
        protected void importPayload(MessageImporter in) {
            in.readByteArray();
            in.readString();
            in.readLongArray();
            in.readIntArray();
        }
    }

    @After
    public void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    private DXNetConfig config(int id) {
        DXNetConfig c = new DXNetConfig(id);
        c.transport = transport;
        c.listen = "127.0.0.1:0";
        c.handlerThreads = 1;
        c.maxMessageSize = 1 << 20;
        c.maxUnfinishedBytesPerConnection = 4 << 20;
        c.maxUnfinishedBytes = 8 << 20;
        TestSupport.smallSimNode(c);
        c.connectTimeoutMs = 5_000;
        return c;
    }

    private DXNet node(int id) throws Exception {
        DXNet n = DXNet.start(config(id));
        n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
        n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        n.registerMessageType(TYPE, LENGTHS, LengthsMessage.class);
        open.add(n);
        return n;
    }

    /** The fuzzing peer: a bare transport of node 2 (no core), so it can send any frame. */
    private Transport peer(DXNet victim) throws Exception {
        AtomicReference<Transport> self = new AtomicReference<>();
        Transport t = Transports.open(config(2), new TransportListener() {
            @Override
            public boolean onBuffer(IncomingBuffer b) {
                b.release();
                self.get().consumed(b);
                return true;
            }

            @Override
            public void onDisconnected(int node) {}
        });
        self.set(t);
        open.add(t);
        t.addNode(0, "127.0.0.1", victim.localPort());
        victim.addNode(2, "127.0.0.1:" + t.localPort());
        return t;
    }

    @Test
    public void noFrameSequenceSilencesTheNode() throws Exception {
        int cases = Integer.getInteger("test.fuzzCases", 50_000);
        DXNet victim = node(0);
        DXNet honest = node(1);
        victim.addNode(1, "127.0.0.1:" + honest.localPort());
        honest.addNode(0, "127.0.0.1:" + victim.localPort());
        AtomicLong garbage = new AtomicLong();
        victim.register(TYPE, LENGTHS, m -> garbage.incrementAndGet());
        victim.register(BytesRequest.TYPE, m -> {
            try {
                victim.sendMessage(BytesResponse.echo((BytesRequest) m));
            } catch (NetworkException e) {
                throw new IllegalStateException(e);
            }
        });
        Transport fuzzer = peer(victim);
        roundTrip(honest, 0);
        long heapBefore = heapAfterGc();
        int threadsBefore = Thread.activeCount();
        Random r = new Random(Long.getLong("test.fuzzSeed", 7));
        long sendFailures = 0;
        long t0 = System.nanoTime();
        for (int c = 0; c < cases; c++) {
            try {
                for (byte[][] f : mutatedFrames(r)) {
                    fuzzer.send(0, f[0], f[1], 0, f[1].length, System.nanoTime() + 2_000_000_000L);
                }
            } catch (NetworkException | IllegalStateException e) {
                sendFailures++; // the victim closed our connection: the next case reconnects
            }
            roundTrip(honest, c);
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        Map<String, Long> s = victim.transportStats();
        long heapAfter = heapAfterGc();
        System.out.printf("frame fuzz over %s: %d cases in %d ms, %d protocol violations, %d garbage messages handled,"
                + " %d partial messages dropped, %d sends refused, heap %d -> %d KB%n", transport, cases, ms,
                s.get("protocol_violations"), garbage.get(), s.get("partial_messages_dropped"), sendFailures,
                heapBefore >> 10, heapAfter >> 10);
        System.out.println("victim " + s + "\nfuzzer " + fuzzer.stats());
        assertTrue(victim.healthy());
        assertNull(victim.failure());
        // The pool that sent the victim's drop notices to the fuzzer ends its threads after 1 s idle.
        long settled = System.nanoTime() + 5_000_000_000L;
        while (Math.abs(threadsBefore - Thread.activeCount()) > 4 && System.nanoTime() < settled) {
            Thread.sleep(50);
        }
        assertNear("no core thread died or leaked", threadsBefore, Thread.activeCount(), 4);
        assertTrue("violations are counted: " + s, s.get("protocol_violations") > cases / 20);
        assertTrue("some frames survive the mutations and reach a handler", garbage.get() > 0);
        assertEquals("stream errors other than violations", 0L, (long) s.get("stream_errors"));
        assertTrue("heap after GC bounded: " + heapBefore + " -> " + heapAfter, heapAfter < heapBefore + (64L << 20));
        assertTrue("unfinished messages hold at most one connection's share",
                s.get("unfinished_bytes_claimed") <= 4L << 20);
    }

    private static void assertNear(String what, int expected, int actual, int slack) {
        assertTrue(what + ": " + expected + " vs " + actual, Math.abs(expected - actual) <= slack);
    }

    /** The honest node's request is answered, with its payload intact. */
    private static void roundTrip(DXNet honest, int c) throws NetworkException {
        long[] v = {c, ~c, 0x0102030405060708L};
        BytesResponse resp = honest.sendSync(new BytesRequest(0, bytesOf(v)), 10_000);
        assertArrayEquals("case " + c, v, longsOf(resp.bytes));
    }

    private static long heapAfterGc() {
        Runtime rt = Runtime.getRuntime();
        System.gc();
        return rt.totalMemory() - rt.freeMemory();
    }

    /**
     * One case: 1–4 messages as frames {header, payload}, the larger ones
     * fragmented, then mutated: header bytes and fields replaced by hostile
     * values, payloads cut or grown, frames dropped, repeated or swapped,
     * headers cut short.
     */
    static List<byte[][]> mutatedFrames(Random r) {
        List<byte[][]> frames = new ArrayList<>();
        int messages = 1 + r.nextInt(4);
        for (int m = 0; m < messages; m++) {
            int total = r.nextInt(3) == 0 ? r.nextInt(20_000) : r.nextInt(100);
            byte[] payload = new byte[total];
            r.nextBytes(payload);
            if (r.nextInt(4) == 0) {
                Arrays.fill(payload, (byte) 0); // lengths of 0: a LengthsMessage that imports
            } else if (total >= 4 && r.nextBoolean()) {
                payload[0] = (byte) (r.nextBoolean() ? 0x7F : 0); // a length prefix that lies, or not
            }
            int chunk = 1 + r.nextInt(Math.max(1, total));
            byte sub = r.nextInt(4) == 0 ? (byte) r.nextInt(256) : LENGTHS;
            int kind = r.nextInt(4) == 0 ? Frame.RESPONSE : 0;
            int at = 0;
            int id = r.nextInt();
            do {
                int n = Math.min(chunk, total - at);
                int flags = kind | (at == 0 ? Frame.FIRST : 0) | (at + n == total ? Frame.LAST : 0);
                byte[] h = new byte[Frame.HEADER];
                Frame.writeHeader(h, Frame.HEADER + n, id, TYPE, sub, flags, r.nextInt(3), total);
                frames.add(new byte[][] {h, Arrays.copyOfRange(payload, at, at + n)});
                at += n;
            } while (at < total);
        }
        int mutations = r.nextInt(4); // a quarter of the cases stay valid
        for (int i = 0; i < mutations; i++) {
            byte[][] f = frames.get(r.nextInt(frames.size()));
            if (f[0].length < Frame.HEADER) {
                continue; // already cut short
            }
            switch (r.nextInt(8)) {
                case 0:
                    f[0][4 + r.nextInt(Frame.HEADER - 4)] ^= (byte) (1 << r.nextInt(8));
                    break;
                case 1: // total
                    FrameMutator.put(f[0], 16, FrameMutator.hostileInt(r, 1 << 20));
                    break;
                case 2: // flags and reserved
                    f[0][10 + r.nextInt(2)] = (byte) r.nextInt(256);
                    break;
                case 3: // message id of a fragment
                    FrameMutator.put(f[0], 4, r.nextInt(8));
                    break;
                case 4: // payload cut or grown (the frame's own length follows it)
                    f[1] = Arrays.copyOf(f[1], r.nextBoolean() ? r.nextInt(f[1].length + 1) : f[1].length + 1 + r.nextInt(64));
                    break;
                case 5: // a header cut short: a record of 4..19 bytes
                    f[0] = Arrays.copyOf(f[0], 4 + r.nextInt(Frame.HEADER - 4));
                    f[1] = new byte[0];
                    break;
                case 6:
                    if (frames.size() > 1) {
                        frames.remove(r.nextInt(frames.size()));
                    } else {
                        frames.add(new byte[][] {f[0].clone(), f[1].clone()}); // the same frame twice
                    }
                    break;
                default:
                    java.util.Collections.swap(frames, r.nextInt(frames.size()), r.nextInt(frames.size()));
            }
        }
        return frames;
    }
}
