package io.ibdxnet.internal;

import io.ibdxnet.ib.IbException;
import io.ibdxnet.ib.IbSettings;
import io.ibdxnet.ib.NativeEngine;
import java.util.List;

/**
 * What {@code transport = auto} becomes on this host, and why: {@code ib} on
 * an RDMA device, else {@code nio}. Without a device {@code ib} would run on
 * the in-process {@code sim} fabric, which cannot reach another process.
 */
public final class AutoTransport {
    final String transport;
    /** Completes "transport = auto: nio, ...". */
    final String reason;

    private AutoTransport(String transport, String reason) {
        this.transport = transport;
        this.reason = reason;
    }

    /** Decides from the ib settings' {@code fabric} and the host's RDMA devices. */
    static AutoTransport choose(IbSettings ib) {
        String fabric = ib.fabric;
        if (fabric != null && !fabric.equalsIgnoreCase("auto")) {
            return new AutoTransport("ib", "because native.fabric = " + fabric + " names a fabric of the native engine");
        }
        List<String> devices;
        try {
            devices = NativeEngine.rdmaDevices();
        } catch (LinkageError e) { // no libibdxnet.so (or no libibverbs for it)
            return new AutoTransport("nio", "because the native library cannot be loaded (" + e.getMessage() + ")");
        } catch (IbException e) {
            return new AutoTransport("nio", "because the RDMA devices cannot be listed (" + e.getMessage() + ")");
        }
        if (devices.isEmpty()) {
            return new AutoTransport("nio", "because this host has no RDMA device (ib would use the in-process sim"
                    + " fabric, which reaches nodes of this process only)");
        }
        return new AutoTransport("ib", "because this host has the RDMA device(s) " + String.join(", ", devices));
    }
}
