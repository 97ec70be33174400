package io.ibdxnet.ib;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.fail;

import io.ibdxnet.DXNetConfig;
import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.internal.Transports;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.TransportListener;
import java.net.DatagramSocket;
import java.net.InetAddress;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * A connect that uses up the whole {@code connectTimeoutMs} (as the resend of
 * records stranded by a close does) fails as set-up failure (UNREACHABLE),
 * not as a caller's deadline cut short: a deadline a few microseconds under
 * the full timeout once rounded down to 1 ms less and read as cut short.
 */
public class IbConnectFailureTest {
    @Rule
    public final Timeout timeout = Timeout.seconds(60);

    @Test
    public void aConnectThatUsesItsWholeTimeoutSaysUnreachable() throws Exception {
        DXNetConfig c = new DXNetConfig(1);
        c.transport = "ib";
        c.connectTimeoutMs = 300;
        c.nativeConfig.put("fabric", "sim");
        TransportListener ignore = new TransportListener() {
            @Override
            public boolean onBuffer(IncomingBuffer buffer) {
                return true;
            }

            @Override
            public void onDisconnected(int node) {}
        };
        // A bound UDP port nobody answers on: node 2's connect can only time out.
        try (DatagramSocket silent = new DatagramSocket(0, InetAddress.getLoopbackAddress());
                IbTransport t = new IbTransport(Transports.ibSettings(c, "127.0.0.1:0"), ignore)) {
            t.addNode(2, "127.0.0.1", silent.getLocalPort());
            try {
                t.open(2);
                fail("connected to nobody");
            } catch (NetworkException e) {
                assertEquals(e.getMessage(), FailureReason.UNREACHABLE, e.reason());
                assertFalse(e.getMessage(), e.getMessage().contains("caller's deadline"));
            }
        }
    }
}
