package io.ibdxnet.soak;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The no-loss soak, short (the long one: ./ibdxnet bench soak). */
public class SoakTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(20);

    private static Soak.Report soak(String transport) throws Exception {
        return check(transport, Soak.run(transport, 3, 300_000, 42));
    }

    private static Soak.Report check(String transport, Soak.Report r) {
        System.err.println(transport + ": " + r);
        assertEquals("verified", r.sent, r.verified);
        assertEquals("lost", 0, r.lost);
        assertEquals("duplicated", 0, r.duplicated);
        assertEquals("reordered", 0, r.reordered);
        assertEquals("corrupted", 0, r.corrupted);
        return r;
    }

    /** 6 nodes with room for 2 connections each, destinations switched in shared time slots: constant eviction. */
    private static void churn(String transport) throws Exception {
        Soak.Report r = check(transport, Soak.run(transport, 6, 60_000, 43, true));
        assertTrue("the messages spanned " + r.slots + " time slots", r.slots >= Soak.MIN_SLOTS);
        assertTrue("no connection was evicted", r.closes > 0);
        assertEquals("orderly closes that timed out", 0, r.closesTimedOut);
    }

    /**
     * Issue 22: 64 nodes in one JVM with room for 8 connections each, each
     * sending to 4 nodes per time slot, to all others over the slots: nothing
     * lost, duplicated or reordered, evicted connections come back on demand.
     * Its failures, a connect not established within the 10 s connect timeout
     * (2 of 7 runs in the previous session; 4 of 4 runs on 2026-11-26 with the
     * JVM confined to one of the 2 cores), came from late exchanges pairing a
     * node's fresh queue pair with a dead one (fixed in the connection manager,
     * {@code tests/stale_exchange.rs}). After the fix, on 2 shared cores (load
     * average 5 to 260 from other work): 12 of 12 runs passed on both cores
     * (this test 3.2 to 9.9 s through gradle) and 6 of 6 with the JVM on one
     * core (71 to 260 s each, this test 73 s);
     * {@code bench/results/2026-11-26-churn-64.txt}.
     */
    @Test
    public void noLossUnderConnectionChurnAmong64NodesWithEightConnectionsOverIbOnSim() throws Exception {
        Soak.Report r = check("ib", Soak.run("ib", 64, 128_000, 44, 8, 4));
        assertTrue("no connection was evicted", r.closes > 0);
        assertEquals("orderly closes that timed out", 0, r.closesTimedOut);
    }

    /** A receiver slower than its sender with stalls: every backlog stays within its bound, nothing is lost. */
    private static void slowReceiver(String transport) throws Exception {
        SlowReceiverSoak.Report r = SlowReceiverSoak.run(transport, 8, 44);
        check(transport, r.messages);
        assertTrue("no handler stall", r.stalls > 0);
        assertEquals("bounds exceeded", "[]", r.violations().toString());
        // The receiver was the bottleneck: backpressure reached the sender.
        assertTrue("senders were never held back: " + r, r.senderBlockedShare > 0.5);
        assertTrue("the flow-control window never filled: " + r, r.maxUnconfirmed >= r.window * 3 / 4);
        assertTrue("heap grew by more than 32 MiB: " + r, r.heapAfter - r.heapBefore < 32L << 20);
    }

    @Test
    public void slowReceiverHoldsMemoryWithinBoundsOverIbOnSim() throws Exception {
        slowReceiver("ib");
    }

    @Test
    public void slowReceiverHoldsMemoryWithinBoundsOverNio() throws Exception {
        slowReceiver("nio");
    }

    @Test
    public void noLossUnderConnectionChurnOverIbOnSim() throws Exception {
        churn("ib");
    }

    @Test
    public void noLossUnderConnectionChurnOverNio() throws Exception {
        churn("nio");
    }

    @Test
    public void noLossOverIbOnSim() throws Exception {
        soak("ib");
    }

    @Test
    public void noLossOverNio() throws Exception {
        soak("nio");
    }
}
