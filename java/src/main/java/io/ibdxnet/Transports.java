package io.ibdxnet;

import io.ibdxnet.ib.IbException;
import io.ibdxnet.ib.IbTransport;
import io.ibdxnet.loopback.LoopbackTransport;
import io.ibdxnet.nio.NioTransport;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Opens the transport a configuration names ({@link DXNetConfig#transport}).
 * It sits beside {@link DXNet}, above the implementations, so the SPI package
 * {@code transport} imports none of them.
 */
final class Transports {
    private static final java.util.logging.Logger LOG = java.util.logging.Logger.getLogger(Transports.class.getName());

    private Transports() {}

    static Transport open(DXNetConfig config, TransportListener listener) throws NetworkException {
        String listen = listenAddress(config);
        int colon = listen.lastIndexOf(':');
        String host = listen.substring(0, colon);
        int port;
        try {
            port = Integer.parseInt(listen.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("listen = '" + listen + "': the port is not a number");
        }
        String transport = config.transport;
        if (transport.equals("auto")) {
            AutoTransport choice = AutoTransport.choose(config.nativeConfig);
            LOG.info("node " + config.nodeId + ": transport = auto: " + choice.transport + ", " + choice.reason);
            transport = choice.transport;
        }
        switch (transport) {
            case "ib":
                return openIb(config, listener, listen);
            case "nio":
                NioTransport.Settings s = new NioTransport.Settings();
                s.nodeId = config.nodeId;
                s.listenHost = host;
                s.listenPort = port;
                s.flowControlWindow = config.flowControlWindow;
                s.flowControlThreshold = config.flowControlThreshold;
                s.connectTimeoutMs = config.connectTimeoutMs;
                s.maxConnections = config.maxConnections;
                s.bufferSize = config.nioBufferSize;
                s.bufferCount = config.nioBufferCount;
                s.ringSize = config.nioRingSize;
                s.keepAliveMs = config.keepAliveMs;
                s.idleTimeoutMs = config.idleTimeoutMs;
                s.checkPeerAddress = config.checkPeerAddress;
                s.authKey = config.authKey();
                return new NioTransport(s, listener);
            case "loopback":
                return new LoopbackTransport(config.nodeId, port, config.flowControlWindow, config.flowControlThreshold,
                        config.nioRingSize, config.nioBufferSize, config.nioBufferCount, listener);
            default:
                throw new IllegalArgumentException("transport '" + config.transport + "' is not one of " + DXNetConfig.TRANSPORTS);
        }
    }

    /** The configured listen address, else the node's own node-table entry (port only), else any port. */
    private static String listenAddress(DXNetConfig config) {
        if (config.listen != null) {
            return config.listen;
        }
        String own = config.nodes.get(config.nodeId);
        if (own != null) {
            return "0.0.0.0" + own.substring(own.lastIndexOf(':'));
        }
        return "0.0.0.0:0";
    }

    private static Transport openIb(DXNetConfig config, TransportListener listener, String listen) throws NetworkException {
        Map<String, String> nativeConfig = new LinkedHashMap<>(config.nativeConfig);
        nativeConfig.put("node_id", Integer.toString(config.nodeId));
        nativeConfig.putIfAbsent("listen", listen);
        nativeConfig.putIfAbsent("max_connections", Integer.toString(config.maxConnections));
        // The node table goes in before the engine reads its first packet: a
        // peer's packets sent while this node starts are not dropped as foreign.
        for (Map.Entry<Integer, String> n : config.nodes.entrySet()) {
            if (n.getKey() != config.nodeId) {
                nativeConfig.putIfAbsent("node." + n.getKey(), n.getValue());
            }
        }
        if (config.authKeyFile != null) {
            nativeConfig.putIfAbsent("auth_key_file", config.authKeyFile);
        }
        try {
            return new IbTransport(nativeConfig, config.flowControlWindow, config.flowControlThreshold,
                    config.connectTimeoutMs, listener);
        } catch (IbException e) {
            throw new NetworkException("cannot start the InfiniBand transport: " + e.getMessage(), e);
        }
    }
}
