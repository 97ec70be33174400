package io.ibdxnet.internal;

import io.ibdxnet.DXNetConfig;
import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.ib.IbException;
import io.ibdxnet.ib.IbSettings;
import io.ibdxnet.ib.IbTransport;
import io.ibdxnet.ib.NativeEngine;
import io.ibdxnet.loopback.LoopbackTransport;
import io.ibdxnet.nio.NioSettings;
import io.ibdxnet.nio.NioTransport;
import io.ibdxnet.transport.AuthKey;
import io.ibdxnet.transport.Transport;
import io.ibdxnet.transport.TransportListener;
import java.util.Map;

/**
 * Opens the transport a configuration names ({@link DXNetConfig#transport}).
 * It sits beside {@link DXNet}, above the implementations, so the SPI package
 * {@code transport} imports none of them.
 */
public final class Transports {
    /** Under the name README documents (from before the class moved to this package). */
    private static final java.util.logging.Logger LOG = java.util.logging.Logger.getLogger("io.ibdxnet.Transports");

    private Transports() {}

    public static Transport open(DXNetConfig config, TransportListener listener) throws NetworkException {
        String listen = listenAddress(config);
        int colon = listen.lastIndexOf(':');
        String host = listen.substring(0, colon);
        int port;
        try {
            port = Integer.parseInt(listen.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("listen = '" + listen + "': the port is not a number");
        }
        // Built (and so checked) whatever transport is used: a wrong native key fails the start on nio too.
        IbSettings ib = ibSettings(config, listen);
        String transport = config.transport;
        if (transport.equals("auto")) {
            AutoTransport choice = AutoTransport.choose(ib);
            LOG.info("node " + config.nodeId + ": transport = auto: " + choice.transport + ", " + choice.reason);
            transport = choice.transport;
        }
        if (!transport.equals("ib")) {
            checkUnusedNativeKeys(config, transport);
        }
        switch (transport) {
            case "ib":
                return openIb(ib, listener, config);
            case "nio":
                NioSettings s = nioSettings(config);
                s.listenHost = host;
                s.listenPort = port;
                s.authKey = AuthKey.load(config.authKeyFile); // the file, else the environment variable, or null
                return new NioTransport(s, listener);
            case "loopback":
                return new LoopbackTransport(config.nodeId, port, config.flowControlWindow, config.flowControlThreshold,
                        config.nioRingSize, config.nioBufferSize, config.nioBufferCount, listener);
            default:
                throw new IllegalArgumentException("transport '" + config.transport + "' is not one of " + DXNetConfig.TRANSPORTS);
        }
    }

    /**
     * {@code native.*} keys do nothing for nio and loopback: their names were
     * checked ({@link #ibSettings}, misspelt ones fail as on ib), their values
     * are checked here by the engine's parser (when the library loads), and they are
     * reported once, so a setting that does not apply is never silently
     * dropped. {@code native.fabric} = auto is what chose the transport: not
     * reported.
     */
    private static void checkUnusedNativeKeys(DXNetConfig config, String transport) {
        if (!config.nativeConfig.isEmpty()) {
            try {
                // Their values too, by the engine's parser, when the library loads here.
                NativeEngine.checkConfig(config.nativeConfig);
            } catch (IllegalArgumentException e) {
                throw config.source() == null ? e : new IllegalArgumentException(config.source() + ": " + e.getMessage(), e);
            } catch (LinkageError e) {
                LOG.info("node " + config.nodeId + ": values of native.* keys not checked (the native library does not "
                        + "load here: " + e + ")");
            }
        }
        java.util.List<String> unused = new java.util.ArrayList<>();
        for (Map.Entry<String, String> e : config.nativeConfig.entrySet()) {
            if (!(e.getKey().equals("fabric") && e.getValue().trim().equalsIgnoreCase("auto"))) {
                unused.add(e.getKey());
            }
        }
        if (!unused.isEmpty()) {
            LOG.warning("node " + config.nodeId + ": transport " + transport + " does not use native."
                    + String.join(", native.", unused) + " (keys of the ib transport's engine)");
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

    /**
     * The ib transport's settings from {@code c}: the one place the
     * configuration becomes the native engine's key/value table
     * ({@link DXNetConfig#nativeSettings}, with the flow control unit), checked
     * for every key ({@link IbSettings}); an error names the file.
     *
     * @param listen the listen address (used when {@code c} names none)
     */
    public static IbSettings ibSettings(DXNetConfig c, String listen) {
        try {
            return new IbSettings(c.nativeSettings(listen), c.flowControlWindow, c.flowControlThreshold, NativeKeys.all());
        } catch (IllegalArgumentException e) {
            throw c.source() == null ? e : new IllegalArgumentException(c.source() + ": " + e.getMessage(), e);
        }
    }

    private static Transport openIb(IbSettings settings, TransportListener listener, DXNetConfig config)
            throws NetworkException {
        try {
            return new IbTransport(settings, listener);
        } catch (IllegalArgumentException e) {
            // The engine refused a native key (named native.<key>): say which file it came from.
            throw config.source() == null ? e : new IllegalArgumentException(config.source() + ": " + e.getMessage(), e);
        } catch (IbException e) {
            throw new NetworkException(FailureReason.RESOURCES, "cannot start the InfiniBand transport: " + e.getMessage(), e);
        }
    }

    /** The NIO transport's settings from {@code c} (listen address and key are set by the caller). */
    public static NioSettings nioSettings(DXNetConfig c) {
        NioSettings s = new NioSettings();
        s.nodeId = c.nodeId;
        s.flowControlWindow = c.flowControlWindow;
        s.flowControlThreshold = c.flowControlThreshold;
        s.connectTimeoutMs = c.connectTimeoutMs;
        s.helloTimeoutMs = c.helloTimeoutMs;
        s.maxConnections = c.maxConnections;
        s.bufferSize = c.nioBufferSize;
        s.bufferCount = c.nioBufferCount;
        s.ringSize = c.nioRingSize;
        s.keepAliveMs = c.keepAliveMs;
        s.idleTimeoutMs = c.idleTimeoutMs;
        s.checkPeerAddress = c.checkPeerAddress;
        return s;
    }
}
