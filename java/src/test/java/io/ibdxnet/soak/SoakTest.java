package io.ibdxnet.soak;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

/** The no-loss soak, short (the long one: ./ibdxnet bench soak). */
public class SoakTest {
    private static void soak(String transport) throws Exception {
        Soak.Report r = Soak.run(transport, 3, 300_000, 42);
        System.err.println(transport + ": " + r);
        assertEquals("verified", r.sent, r.verified);
        assertEquals("lost", 0, r.lost);
        assertEquals("duplicated", 0, r.duplicated);
        assertEquals("reordered", 0, r.reordered);
        assertEquals("corrupted", 0, r.corrupted);
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
