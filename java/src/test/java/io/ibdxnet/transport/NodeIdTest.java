package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.TestSupport;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

public class NodeIdTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    @Test
    public void everySixteenBitIdHasASlotAndAllOnesIsNoNode() {
        assertEquals(65536, NodeId.COUNT);
        assertEquals(0xFFFF, NodeId.NONE);
        assertTrue(NodeId.isValid(0));
        assertTrue(NodeId.isValid(65534));
        assertFalse("the 'no node' id", NodeId.isValid(NodeId.NONE));
        assertFalse(NodeId.isValid(-1));
        assertFalse(NodeId.isValid(NodeId.COUNT));
    }
}
