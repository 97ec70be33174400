package io.ibdxnet.internal;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.TestSupport;
import io.ibdxnet.core.Frame;
import io.ibdxnet.core.ReceiveLimits;
import io.ibdxnet.core.StreamAssembler;
import io.ibdxnet.transport.OutgoingRingBuffer;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * {@link DropNotices} on a hand-driven clock and timer: the first drop of a
 * source is told at once, the drops within the next 100 ms are summed into
 * one notice at the interval's end, each source on its own; the notice's
 * frame is one the unchanged assembler takes (no new flag); and no request
 * gets the notice's request id 0.
 */
public class DropNoticesTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);

    private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

    private long now = 1_000 * MS;
    /** Scheduled actions: due time (nanoseconds), action. */
    private final List<Object[]> scheduled = new ArrayList<>();
    private final List<String> told = new ArrayList<>();
    private final DropNotices notices = new DropNotices(
            (source, messages, bytes, causes) -> told.add(source + " " + messages + " " + bytes + " " + causes),
            (delayMs, r) -> scheduled.add(new Object[] {now + delayMs * MS, r}), () -> now);

    /** Moves the clock to {@code ms} later, running what became due. */
    private void advance(long ms) {
        now += ms * MS;
        for (Object[] s : new ArrayList<>(scheduled)) {
            if ((long) s[0] <= now) {
                scheduled.remove(s);
                ((Runnable) s[1]).run();
            }
        }
    }

    @Test
    public void theFirstDropIsToldAtOnceTheRestOfTheIntervalSummed() {
        notices.dropped(3, "no receiver for type 1/1", 20);
        assertEquals(List.of("3 1 20 no receiver for type 1/1"), told);
        for (int i = 0; i < 9; i++) {
            advance(5);
            notices.dropped(3, "no receiver for type 1/1", 20);
        }
        notices.dropped(3, "type 9/2 not registered", 4);
        assertEquals("summed, not told yet", 1, told.size());
        assertEquals("one timer for the interval", 1, scheduled.size());
        advance(54); // 45 ms passed: the interval ends 100 ms after the first notice
        assertEquals(1, told.size());
        advance(1);
        assertEquals(List.of("3 1 20 no receiver for type 1/1", "3 10 184 no receiver for type 1/1; type 9/2 not registered"),
                told);
        assertTrue(scheduled.isEmpty());
        // Quiet for the interval: the next drop is told at once again.
        advance(100);
        notices.dropped(3, "no receiver for type 1/1", 20);
        assertEquals(3, told.size());
        assertEquals("3 1 20 no receiver for type 1/1", told.get(2));
    }

    @Test
    public void aDropRightAfterANoticeWaitsForTheIntervalsEnd() {
        notices.dropped(1, "a", 1);
        advance(99);
        notices.dropped(1, "a", 2);
        assertEquals(1, told.size());
        advance(1);
        assertEquals("1 1 2 a", told.get(1));
        // Told at 100 ms: the next drop waits for the interval after that.
        notices.dropped(1, "a", 3);
        assertEquals(2, told.size());
        advance(100);
        assertEquals(List.of("1 1 1 a", "1 1 2 a", "1 1 3 a"), told);
    }

    @Test
    public void eachSourceIsLimitedOnItsOwn() {
        notices.dropped(1, "a", 1);
        notices.dropped(2, "b", 2);
        notices.dropped(65_534, "c", 3);
        notices.dropped(1, "a", 1);
        assertEquals(List.of("1 1 1 a", "2 1 2 b", "65534 1 3 c"), told);
        advance(100);
        assertEquals("1 1 1 a", told.get(3));
        assertEquals(4, told.size());
    }

    @Test
    public void aFloodIsOneNoticePerIntervalNamingAFewCauses() {
        long sent = 0;
        for (int ms = 0; ms < 1_000; ms++) {
            for (int i = 0; i < 100; i++) {
                notices.dropped(7, "no receiver for type " + (i % 10) + "/0", 8);
                sent++;
            }
            advance(1);
        }
        advance(100);
        assertTrue(told.size() + " notices", told.size() >= 10 && told.size() <= 11);
        long messages = 0;
        long bytes = 0;
        for (String t : told) {
            String[] f = t.split(" ", 4);
            messages += Long.parseLong(f[1]);
            bytes += Long.parseLong(f[2]);
        }
        assertEquals(sent, messages);
        assertEquals(8 * sent, bytes);
        String many = told.get(2); // types 0..9 in turn: the first 4 named, the drops of the other 6 counted
        assertTrue(many, many.matches("7 \\d+ \\d+ no receiver for type 0/0; no receiver for type 1/0; "
                + "no receiver for type 2/0; no receiver for type 3/0; \\d+ more messages for other causes"));
    }

    /**
     * The notice's frame (as the send path writes it) is an error response
     * with request id 0 that the assembler — unchanged, as in earlier
     * versions — hands on as it does any error response: no protocol violation.
     */
    @Test
    public void theNoticeIsAnErrorResponseTheAssemblerTakes() throws Exception {
        DropNotice n = new DropNotice(1, 10, 200, "no receiver for type 1/1");
        MessageExporter out = new MessageExporter(64);
        ApiAccess api = ApiAccess.get();
        api.exportPayload(n, out);
        int size = api.size(out);
        assertEquals(api.payloadSize(n), size);
        assertEquals(0, api.requestId(n));
        byte[] header = new byte[Frame.HEADER];
        Frame.writeHeader(header, Frame.HEADER + size, 0, n.getType(), n.getSubtype(),
                Frame.RESPONSE | Frame.ERROR | Frame.FIRST | Frame.LAST, 0, size);
        int aligned = OutgoingRingBuffer.aligned(Frame.HEADER + size);
        ByteBuffer frame = ByteBuffer.allocateDirect(aligned);
        frame.put(header).put(api.array(out), 0, size);
        long address = io.ibdxnet.memory.Memory.address(frame);
        List<Object[]> got = new ArrayList<>();
        StreamAssembler a = new StreamAssembler(0, 1, new ReceiveLimits(1 << 20, 1 << 20, 1 << 20));
        assertEquals(aligned, a.feed(address, aligned, (src, type, sub, flags, req, array, at, length) -> {
            byte[] payload = new byte[length];
            if (array != null) {
                System.arraycopy(array, (int) at, payload, 0, length);
            } else {
                io.ibdxnet.memory.Memory.copy(at, payload, 0, length);
            }
            got.add(new Object[] {flags, req, payload});
        }));
        assertEquals(1, got.size());
        assertEquals(Frame.RESPONSE | Frame.ERROR | Frame.FIRST | Frame.LAST, got.get(0)[0]);
        assertEquals(0, got.get(0)[1]);
        MessageImporter in = api.newImporter((byte[]) got.get(0)[2], size);
        assertEquals(DropNotice.MARKER, in.readString());
        assertEquals("no receiver for type 1/1", in.readString());
        assertEquals(10, in.readLong());
        assertEquals(200, in.readLong());
    }

    /** A notice's request id 0 is never a request's: after wrapping around, the ids skip it. */
    @Test
    public void requestIdsSkipZero() throws Exception {
        PendingRequests r = new PendingRequests(0, new CoreCounters(), new io.ibdxnet.core.RateLimitedLog(
                java.util.logging.Logger.getLogger("test"), 1_000));
        try {
            java.lang.reflect.Field next = PendingRequests.class.getDeclaredField("nextRequestId");
            next.setAccessible(true);
            // Ids are positive (modulo 2^31) and skip 0 where the counter wraps.
            ((java.util.concurrent.atomic.AtomicInteger) next.get(r)).set(Integer.MAX_VALUE);
            assertEquals(Integer.MAX_VALUE, r.open(1, 1_000, Object.class).requestId);
            assertEquals(1, r.open(1, 1_000, Object.class).requestId);
            assertEquals(2, r.open(1, 1_000, Object.class).requestId);
            ((java.util.concurrent.atomic.AtomicInteger) next.get(r)).set(-1);
            assertEquals(Integer.MAX_VALUE, r.open(1, 1_000, Object.class).requestId);
            assertEquals(1, r.open(1, 1_000, Object.class).requestId);
        } finally {
            r.close();
        }
    }
}
