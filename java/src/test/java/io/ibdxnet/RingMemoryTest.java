package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesMessage;
import java.util.List;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * A connection's ring (nioRingSize, allocated when it opens) larger than
 * the JVM's direct memory: the send fails with a NetworkException naming
 * nioRingSize, the size and the limit, not a bare OutOfMemoryError, and the
 * node goes on. Run in a child JVM with {@code -XX:MaxDirectMemorySize=48m}
 * (the receive pools start with 1 MiB each, a ring would need 64 MiB).
 */
public class RingMemoryTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    @Test
    public void aRingTheJvmCannotHoldFailsTheSendNamingTheKey() throws Exception {
        ChildJvm.Result r = ChildJvm.run(Child.class, List.of("-XX:MaxDirectMemorySize=48m"), List.of(), 60_000);
        String text = r.output;
        assertEquals(text, 0, r.exit);
        for (String transport : new String[] {"loopback", "nio"}) {
            assertTrue(text, text.contains(transport + ": NetworkException: the ring of the connection to node 1 "
                    + "(nioRingSize = 67108864) needs 67108864 bytes of direct memory; this JVM allows 50331648"));
        }
    }

    /** Two nodes with 64 MiB rings in a JVM of 48 MiB direct memory; prints what a send does. */
    public static final class Child {
        public static void main(String[] args) throws Exception {
            for (String transport : new String[] {"loopback", "nio"}) {
                DXNet[] n = new DXNet[2];
                try {
                    for (int i = 0; i < 2; i++) {
                        DXNetConfig c = new DXNetConfig(i);
                        c.transport = transport;
                        c.listen = "127.0.0.1:0";
                        c.nioRingSize = 64 << 20;
                        c.nioBufferCount = 256; // pools of up to 16 MiB each
                        n[i] = DXNet.start(c);
                    }
                    n[0].addNode(1, "127.0.0.1:" + n[1].localPort());
                    try {
                        n[0].sendMessage(new BytesMessage(1, new byte[8]));
                        System.out.println(transport + ": sent");
                    } catch (NetworkException e) {
                        System.out.println(transport + ": NetworkException: " + e.getMessage());
                    }
                } finally {
                    for (DXNet d : n) {
                        if (d != null) {
                            d.close();
                        }
                    }
                }
            }
        }
    }
}
