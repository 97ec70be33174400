package io.ibdxnet.nio;

import java.util.logging.Logger;

/** The logger of the NIO transport's classes, under the name README documents. */
final class NioLog {
    static final Logger LOG = Logger.getLogger("io.ibdxnet.nio.NioTransport");

    private NioLog() {
    }
}
