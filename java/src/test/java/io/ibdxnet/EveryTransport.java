package io.ibdxnet;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.junit.After;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;

/**
 * What a test run over every transport shares: the transport list as the
 * parameter, the nodes it started, and their close after each test. A
 * subclass adds its own {@code Timeout} rule.
 */
@RunWith(Parameterized.class)
public abstract class EveryTransport {
    /** The transports, each a run of the subclass's tests. */
    @Parameterized.Parameters(name = "{0}")
    public static Object[] transports() {
        return new Object[] {"ib", "nio", "loopback"};
    }

    /** This run's transport. */
    @Parameterized.Parameter
    public String transport;

    /** Every node a test started: closed after it. */
    protected final List<DXNet> nodes = new ArrayList<>();

    @After
    public void closeAll() {
        for (DXNet n : nodes) {
            n.close();
        }
    }

    /** {@code count} nodes of this run's transport that know each other (see {@link TestSupport#mesh}). */
    protected List<DXNet> mesh(int count, Consumer<DXNetConfig> tune) throws Exception {
        return TestSupport.mesh(transport, count, tune, nodes);
    }
}
