package io.ibdxnet;

import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.List;
import java.util.function.Consumer;

/**
 * The messaging suite, run unchanged over every transport: what its classes
 * ({@link DXNetDeliveryTest}, {@link DXNetRequestsTest},
 * {@link DXNetFlowControlTest}, {@link DXNetConnectionsTest}) share. Their
 * nodes know each other, have one handler thread (in-order delivery, which
 * the tests check) and a connection limit, and know {@link DataMessage},
 * {@link BytesRequest} and {@link BytesResponse}.
 */
abstract class DXNetSuite extends EveryTransport {
    /** {@code count} nodes, connection limit 100. */
    List<DXNet> start(int count) throws Exception {
        return start(count, "100");
    }

    /** {@code count} nodes with connection limit {@code maxConnections}. */
    List<DXNet> start(int count, String maxConnections) throws Exception {
        return start(count, maxConnections, c -> {});
    }

    /** {@code count} nodes with connection limit {@code maxConnections}, then what {@code tune} sets. */
    List<DXNet> start(int count, String maxConnections, Consumer<DXNetConfig> tune) throws Exception {
        List<DXNet> out = mesh(count, c -> {
            c.maxConnections = Integer.parseInt(maxConnections);
            c.handlerThreads = 1; // in-order delivery, checked below
            tune.accept(c);
        });
        for (DXNet n : out) {
            n.registerMessageType(DataMessage.TYPE, DataMessage.DATA, DataMessage.class);
            n.registerMessageType(BytesRequest.TYPE, BytesRequest.class);
            n.registerMessageType(BytesResponse.TYPE, BytesResponse.class);
        }
        return out;
    }
}
