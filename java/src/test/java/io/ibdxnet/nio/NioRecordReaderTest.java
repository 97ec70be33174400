package io.ibdxnet.nio;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import io.ibdxnet.transport.DirectBufferPool;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.Random;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The record walk of an incoming channel: control words are cut out of a
 * read in one pass. Work is counted (bytes moved), not timed: a read full of
 * control words once moved the rest of the buffer down for each word.
 */
public class NioRecordReaderTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    private final NioCounters counters = new NioCounters();
    private final NioRecordReader reader = new NioRecordReader(new DirectBufferPool(2, 4096), null, counters);

    /** {@code units} times: a keep-alive word, then a data record of {@code record} bytes (word included). */
    private static byte[] stream(int units, int record, ByteArrayOutputStream data) {
        ByteBuffer b = ByteBuffer.allocate(units * (4 + record));
        for (int u = 0; u < units; u++) {
            b.putInt(NioWire.KEEP_ALIVE);
            int start = b.position();
            b.putInt(record);
            for (int i = 4; i < record; i++) {
                b.put((byte) (u * 7 + i));
            }
            data.write(b.array(), start, record);
        }
        return b.array();
    }

    /** Feeds {@code in} to the walk as one read per chunk (sizes from {@code chunks}); returns the data kept. */
    private byte[] feed(NioChannel c, byte[] in, int[] chunks) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteBuffer bb = ByteBuffer.allocateDirect(in.length + 4);
        int at = 0;
        for (int k = 0; at < in.length; k++) {
            int n = Math.min(chunks[k % chunks.length], in.length - at);
            bb.clear();
            bb.put(c.held, 0, c.heldCount); // as readData does
            bb.put(in, at, n);
            at += n;
            c.heldCount = 0;
            int kept = reader.records(c, bb, bb.position());
            byte[] d = new byte[kept];
            bb.get(0, d);
            out.write(d, 0, kept);
        }
        return out.toByteArray();
    }

    @Test
    public void aReadOfOnlyKeepAlivesMovesNothing() throws Exception {
        for (int bytes : new int[] {64 << 10, 1 << 20, 4 << 20}) {
            ByteBuffer b = ByteBuffer.allocateDirect(bytes);
            while (b.hasRemaining()) {
                b.putInt(NioWire.KEEP_ALIVE);
            }
            long keepAlives = counters.keepAlives.get();
            reader.bytesMoved = 0;
            assertEquals("no data", 0, reader.records(NioChannel.incoming(1, null, null), b, bytes));
            assertEquals(bytes + " bytes of keep-alives moved bytes", 0, reader.bytesMoved);
            assertEquals("each word counted", bytes / 4, counters.keepAlives.get() - keepAlives);
        }
    }

    /**
     * A keep-alive before each record: every data byte moves at most once, so
     * the work of a 4 MiB read is 4 times that of a 1 MiB read (the bytes
     * moved, counted), and the data comes out whole and in order.
     */
    @Test
    public void workIsLinearInTheReadAndTheDataIsKept() throws Exception {
        long[] moved = new long[2];
        int[] sizes = {1 << 20, 4 << 20};
        for (int s = 0; s < 2; s++) {
            ByteArrayOutputStream data = new ByteArrayOutputStream();
            byte[] in = stream(sizes[s] / 64, 60, data);
            reader.bytesMoved = 0;
            assertArrayEquals(data.toByteArray(), feed(NioChannel.incoming(1, null, null), in, new int[] {in.length}));
            moved[s] = reader.bytesMoved;
            assertTrue(sizes[s] + "-byte read: " + moved[s] + " bytes moved, more than its data " + data.size(),
                    moved[s] <= data.size());
        }
        System.out.println("NioRecordReaderTest: bytes moved for a 1 MiB read " + moved[0] + ", for a 4 MiB read " + moved[1]);
        assertTrue("1 MiB: " + moved[0] + ", 4 MiB: " + moved[1] + " bytes moved", moved[1] <= 4 * moved[0] + 64);
    }

    /** Reads that split words and records anywhere: the data kept is the data sent, in order. */
    @Test
    public void readsSplitAnywhereKeepTheData() throws Exception {
        Random r = new Random(19);
        for (int round = 0; round < 50; round++) {
            ByteArrayOutputStream data = new ByteArrayOutputStream();
            byte[] in = stream(1 + r.nextInt(200), 4 * (1 + r.nextInt(40)), data);
            int[] chunks = new int[1 + r.nextInt(8)];
            for (int i = 0; i < chunks.length; i++) {
                chunks[i] = 1 + r.nextInt(300);
            }
            assertArrayEquals("round " + round, data.toByteArray(), feed(NioChannel.incoming(1, null, null), in, chunks));
        }
    }
}
