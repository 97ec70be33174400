package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.app.BytesMessage;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * {@link DXNet#isConnected} and the {@link DXNet.ConnectionListener} follow a
 * connection through its life (issue 21): none before the first send, open
 * after it, gone when the peer closes — on every transport.
 */
public class ConnectionStateTest extends EveryTransport {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    @Test
    public void aConnectionIsReportedWhenItOpensAndWhenThePeerGoes() throws Exception {
        List<DXNet> n = mesh(2, c -> c.idleTimeoutMs = 2_000);
        List<String> events = new CopyOnWriteArrayList<>();
        n.get(0).setConnectionListener(new DXNet.ConnectionListener() {
            @Override
            public void connected(int node) {
                events.add("connected " + node);
            }

            @Override
            public void disconnected(int node) {
                events.add("disconnected " + node);
            }
        });
        for (DXNet d : n) {
            d.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        }
        assertFalse("no connection before the first send", n.get(0).isConnected(1));
        assertFalse(n.get(0).isConnected(5));
        assertFalse("an id out of range is no connection", n.get(0).isConnected(70_000));

        n.get(0).sendMessage(new BytesMessage(1, new byte[8]));
        assertTrue(n.get(0).isConnected(1));
        TestSupport.waitFor("the connected event", () -> events.contains("connected 1"));
        assertEquals("one event per connection", 1, events.stream().filter(e -> e.equals("connected 1")).count());

        n.get(1).close();
        TestSupport.waitFor("the disconnected event", 30_000, () -> events.contains("disconnected 1"));
        TestSupport.waitFor("the connection is gone", 30_000, () -> !n.get(0).isConnected(1));
        n.get(0).close();
        assertFalse("a closed node has no connections", n.get(0).isConnected(1));
    }

    /** A listener that throws is logged; the node carries on. */
    @Test
    public void aThrowingListenerDoesNotHurtTheNode() throws Exception {
        List<DXNet> n = mesh(2, c -> { });
        n.get(0).setConnectionListener(new DXNet.ConnectionListener() {
            @Override
            public void connected(int node) {
                throw new IllegalStateException("listener failed on purpose");
            }

            @Override
            public void disconnected(int node) {
                throw new IllegalStateException("listener failed on purpose");
            }
        });
        List<Integer> got = new CopyOnWriteArrayList<>();
        for (DXNet d : n) {
            d.registerMessageType(BytesMessage.TYPE, BytesMessage.class);
        }
        n.get(1).register(BytesMessage.class, m -> got.add(m.bytes.length));
        n.get(0).sendMessage(new BytesMessage(1, new byte[3]));
        n.get(0).sendMessage(new BytesMessage(1, new byte[4]));
        TestSupport.waitFor("both messages", () -> got.size() == 2);
        assertTrue(n.get(0).healthy());
    }
}
