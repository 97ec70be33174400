package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.ChildJvm;
import io.ibdxnet.Senders;
import io.ibdxnet.memory.Memory;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The Java transports' receive pool: starts small, grows only when every buffer is lent out, never lends one twice. */
public class DirectBufferPoolTest {
    @Rule
    public final Timeout timeout = Timeout.seconds(120);

    @Test
    public void startsWithAFewBuffersAndGrowsOnlyWhenAllAreLentOut() {
        DirectBufferPool p = new DirectBufferPool(512, 4096);
        assertEquals(DirectBufferPool.INITIAL, p.allocated());
        assertEquals(DirectBufferPool.INITIAL * 4096L, p.allocatedBytes());
        // A buffer that comes back is lent again before the pool grows.
        for (int i = 0; i < 1000; i++) {
            p.release(p.take());
        }
        assertEquals(DirectBufferPool.INITIAL, p.allocated());
        List<Integer> lent = new ArrayList<>();
        for (int i = 0; i < DirectBufferPool.INITIAL; i++) {
            lent.add(p.take());
        }
        assertEquals(DirectBufferPool.INITIAL, p.allocated());
        int grown = p.take();
        assertEquals(DirectBufferPool.INITIAL, grown);
        assertEquals(DirectBufferPool.INITIAL + 1, p.allocated());
        assertEquals(4096, p.buffer(grown).capacity());
        assertEquals(Memory.address(p.buffer(grown)), p.address(grown));
        p.release(grown);
        assertEquals(grown, p.take());
        assertEquals(DirectBufferPool.INITIAL + 1, p.allocated());
    }

    @Test
    public void lendsEveryBufferOnceUpToItsSizeThenNone() {
        DirectBufferPool p = new DirectBufferPool(40, 4096);
        boolean[] seen = new boolean[40];
        for (int i = 0; i < 40; i++) {
            int id = p.take();
            assertTrue("id " + id, id >= 0 && id < 40 && !seen[id]);
            seen[id] = true;
        }
        assertEquals(-1, p.take());
        assertEquals(40, p.allocated());
        p.release(7);
        assertEquals(7, p.take());
        assertEquals(-1, p.take());
    }

    @Test(expected = IllegalStateException.class)
    public void aBufferNeverAllocatedCannotBeReturned() {
        new DirectBufferPool(512, 4096).release(DirectBufferPool.INITIAL + 3);
    }

    /**
     * Threads take and return buffers at random while the pool grows: no
     * buffer is held by two threads at once, each buffer's address is its
     * own, and the pool never exceeds its size.
     */
    @Test
    public void concurrentTakersNeverShareABuffer() throws Exception {
        int size = 200;
        DirectBufferPool p = new DirectBufferPool(size, 4096);
        AtomicIntegerArray held = new AtomicIntegerArray(size);
        List<List<Integer>> lent = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            lent.add(new ArrayList<>());
        }
        Senders.run(4, 200_000, (id, seq) -> {
            int me = id + 1;
            List<Integer> mine = lent.get(id);
            if (mine.isEmpty() || mine.size() < 60 && ThreadLocalRandom.current().nextBoolean()) {
                int b = p.take();
                if (b < 0) {
                    return;
                }
                if (!held.compareAndSet(b, 0, me)) {
                    throw new AssertionError("buffer " + b + " lent twice (held by " + held.get(b) + ")");
                }
                ByteBuffer buf = p.buffer(b);
                if (buf == null || p.address(b) != Memory.address(buf)) {
                    throw new AssertionError("buffer " + b + " not published with its address");
                }
                buf.putInt(0, me);
                mine.add(b);
            } else {
                int b = mine.remove(mine.size() - 1);
                if (p.buffer(b).getInt(0) != me) {
                    throw new AssertionError("buffer " + b + " written by another holder");
                }
                held.set(b, 0);
                p.release(b);
            }
        });
        assertTrue("the pool grew: " + p.allocated(), p.allocated() > DirectBufferPool.INITIAL);
        assertTrue("the pool stayed within its size: " + p.allocated(), p.allocated() <= size);
    }

    /**
     * With the JVM's direct memory used up by others, the pool cannot grow:
     * take says none is free (counted as refused) instead of throwing, and a
     * returned buffer is lent again. In a child JVM with 8 MiB of direct memory.
     */
    @Test
    public void aGrowthTheJvmCannotHoldIsRefusedNotThrown() throws Exception {
        ChildJvm.Result r = ChildJvm.run(Exhausted.class, List.of("-XX:MaxDirectMemorySize=8m"), List.of(), 60_000);
        assertEquals(r.output, 0, r.exit);
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("took (\\d+) then -1, refused 1, again 0").matcher(r.output);
        assertTrue(r.output, m.find());
        int took = Integer.parseInt(m.group(1));
        // It grew beyond its first 16, and stopped where the memory ended (about 24), short of its 64.
        assertTrue(r.output, took > DirectBufferPool.INITIAL && took < 64);
    }

    /** A pool of up to 64 × 64 KiB (4 MiB) beside 6.5 MiB of other direct buffers in 8 MiB. */
    public static final class Exhausted {
        public static void main(String[] args) {
            DirectBufferPool p = new DirectBufferPool(64, 64 << 10);
            List<ByteBuffer> others = new ArrayList<>();
            for (int i = 0; i < 104; i++) {
                others.add(ByteBuffer.allocateDirect(64 << 10));
            }
            int n = 0;
            int id;
            while ((id = p.take()) >= 0) {
                n++;
            }
            p.release(0);
            System.out.println("took " + n + " then " + id + ", refused " + p.refused() + ", again " + p.take()
                    + " (others " + others.size() + ")");
        }
    }
}
