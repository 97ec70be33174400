package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.util.concurrent.atomic.AtomicInteger;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The phases of {@link IdleStrategy}: spin, yield, park (growing), and the end of a strategy that blocks. */
public class IdleStrategyTest {
    @Rule
    public final Timeout timeout = Timeout.seconds(60);

    @Test
    public void aWaiterSpinsItsSpinsThenParks() {
        IdleStrategy s = IdleStrategy.waiter();
        for (int i = 0; i < IdleStrategy.SPINS; i++) {
            assertEquals("idle " + i, IdleStrategy.Phase.SPIN, s.phase());
            assertFalse(s.parking());
            assertTrue(s.idle());
        }
        assertEquals(IdleStrategy.Phase.PARK, s.phase());
        assertTrue(s.parking());
        long t0 = System.nanoTime();
        assertTrue(s.idle());
        assertTrue("a park lasts", System.nanoTime() - t0 >= IdleStrategy.FIRST_PARK_NS / 2);
        s.reset();
        assertEquals("progress: spinning again", IdleStrategy.Phase.SPIN, s.phase());
    }

    @Test
    public void beforeBlockingYieldsForItsTimeThenIsOver() {
        IdleStrategy s = IdleStrategy.beforeBlocking();
        assertEquals(IdleStrategy.Phase.YIELD, s.phase());
        long t0 = System.nanoTime();
        int yields = 0;
        while (s.idle()) {
            yields++;
            assertEquals(IdleStrategy.Phase.YIELD, s.phase());
        }
        long took = System.nanoTime() - t0;
        assertTrue("yielded " + took + " ns", took >= IdleStrategy.YIELD_NANOS);
        assertTrue(yields >= 1);
        assertEquals(IdleStrategy.Phase.BLOCK, s.phase());
        assertFalse("over: stays over", s.idle());
        s.reset();
        assertEquals(IdleStrategy.Phase.YIELD, s.phase());
        assertTrue(s.idle());
    }

    @Test
    public void untilAndPollEndWithTheWorkOrAfterTheYieldPhase() {
        AtomicInteger calls = new AtomicInteger();
        // The first pause always yields; whether a second one fits in YIELD_NANOS depends on the
        // scheduler (one yield took longer than that on a loaded host): ready at the second look.
        assertTrue(IdleStrategy.until(() -> calls.incrementAndGet() >= 2));
        assertEquals("one yield, then ready", 2, calls.get());
        calls.set(0);
        assertEquals("x", IdleStrategy.poll(() -> calls.incrementAndGet() >= 2 ? "x" : null));
        long t0 = System.nanoTime();
        assertFalse(IdleStrategy.until(() -> false));
        assertNull(IdleStrategy.poll(() -> null));
        assertTrue(System.nanoTime() - t0 >= 2 * IdleStrategy.YIELD_NANOS);
    }

    @Test
    public void aLongWaitsParksGrowFromTheFirstToTheLongest() throws Exception {
        IdleStrategy b = IdleStrategy.parkingOnly();
        assertTrue(b.parking());
        assertEquals(IdleStrategy.Phase.PARK, b.phase());
        long t0 = System.nanoTime();
        b.idle();
        assertEquals("a short wait polls", IdleStrategy.FIRST_PARK_NS, b.nextParkNs());
        while (System.nanoTime() - t0 < IdleStrategy.PATIENCE_NS) {
            b.idle();
        }
        for (int i = 0; i < 20; i++) {
            b.idle();
        }
        assertEquals(IdleStrategy.MAX_PARK_NS, b.nextParkNs());
        b.reset();
        assertEquals(IdleStrategy.FIRST_PARK_NS, b.nextParkNs());
        assertTrue(!IdleStrategy.waiter().parking());
    }
}
