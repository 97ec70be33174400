package io.ibdxnet.metrics;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import javax.management.InstanceAlreadyExistsException;
import javax.management.InstanceNotFoundException;
import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;

/**
 * One node's metrics: two MBeans on the platform MBean server, registered by
 * {@link #start} and unregistered by {@link #close} —
 * {@code io.ibdxnet:type=Node,node=<id>} (the core's counters) and
 * {@code io.ibdxnet:type=Node,node=<id>,transport=<kind>} (the transport's:
 * on ib the native engine's statistics map, with the timers of
 * {@code native.stats_timers}) — and, if asked for, a statistics line every
 * interval on the {@link System.Logger} {@value #LOGGER} (INFO). A second
 * node with the same id in this JVM gets {@code ,instance=2} (3, …) added to
 * both names.
 */
public final class NodeMetrics implements AutoCloseable {
    /** The domain of the MBeans. */
    public static final String DOMAIN = "io.ibdxnet";
    /** The logger of the periodic statistics line. */
    public static final String LOGGER = "io.ibdxnet.stats";

    private final List<ObjectName> names;
    private final ScheduledThreadPoolExecutor printer;

    private NodeMetrics(List<ObjectName> names, ScheduledThreadPoolExecutor printer) {
        this.names = names;
        this.printer = printer;
    }

    /** {@code io.ibdxnet:type=Node,node=<node>[,transport=<transport>][,instance=<instance>]}. */
    public static ObjectName name(int node, String transport, int instance) {
        StringBuilder s = new StringBuilder(DOMAIN).append(":type=Node,node=").append(node);
        if (transport != null) {
            s.append(",transport=").append(transport);
        }
        if (instance > 1) {
            s.append(",instance=").append(instance);
        }
        try {
            return new ObjectName(s.toString());
        } catch (JMException e) {
            throw new IllegalArgumentException(s + ": " + e.getMessage(), e);
        }
    }

    /**
     * Registers node {@code node}'s MBeans and, if {@code intervalMs > 0},
     * starts its statistics line. A failure to register is logged, not thrown:
     * the node runs without them.
     */
    public static NodeMetrics start(int node, String transport, Supplier<Map<String, Long>> core,
            Supplier<Map<String, Long>> transportCounters, long intervalMs) {
        List<ObjectName> names = register(node, transport, core, transportCounters);
        ScheduledThreadPoolExecutor printer = null;
        if (intervalMs > 0) {
            printer = new ScheduledThreadPoolExecutor(1, r -> {
                Thread t = new Thread(r, "dxnet-stats-" + node);
                t.setDaemon(true);
                return t;
            });
            System.Logger log = System.getLogger(LOGGER);
            printer.scheduleAtFixedRate(() -> {
                try {
                    log.log(System.Logger.Level.INFO, line(node, transport, core.get(), transportCounters.get()));
                } catch (RuntimeException e) {
                    log.log(System.Logger.Level.WARNING, "node " + node + ": reading the statistics failed", e);
                }
            }, intervalMs, intervalMs, TimeUnit.MILLISECONDS);
        }
        return new NodeMetrics(names, printer);
    }

    /** {@code ib}, {@code nio}, {@code loopback}: the transport's class name without {@code Transport}, lower case. */
    public static String kindOf(Object transport) {
        String n = transport.getClass().getSimpleName();
        if (n.endsWith("Transport") && n.length() > "Transport".length()) {
            n = n.substring(0, n.length() - "Transport".length());
        }
        return n.toLowerCase(java.util.Locale.ROOT);
    }

    /** The statistics line: {@code node <id> (<transport>): core k=v … transport k=v …}. */
    static String line(int node, String transport, Map<String, Long> core, Map<String, Long> transportCounters) {
        StringBuilder s = new StringBuilder("node ").append(node).append(" (").append(transport).append("): core");
        core.forEach((k, v) -> s.append(' ').append(k).append('=').append(v));
        s.append(" transport");
        transportCounters.forEach((k, v) -> s.append(' ').append(k).append('=').append(v));
        return s.toString();
    }

    private static synchronized List<ObjectName> register(int node, String transport, Supplier<Map<String, Long>> core,
            Supplier<Map<String, Long>> transportCounters) {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        for (int instance = 1; instance < 1 << 16; instance++) {
            ObjectName c = name(node, null, instance);
            ObjectName t = name(node, transport, instance);
            try {
                server.registerMBean(new CounterBean("node " + node + ": the messaging core's counters", core), c);
            } catch (InstanceAlreadyExistsException taken) {
                continue;
            } catch (JMException | RuntimeException e) {
                failed(node, e);
                return Collections.emptyList();
            }
            try {
                server.registerMBean(new CounterBean("node " + node + ": the " + transport + " transport's counters",
                        transportCounters), t);
                List<ObjectName> both = new ArrayList<>();
                both.add(c);
                both.add(t);
                return Collections.unmodifiableList(both);
            } catch (InstanceAlreadyExistsException taken) {
                unregister(server, c);
            } catch (JMException | RuntimeException e) {
                unregister(server, c);
                failed(node, e);
                return Collections.emptyList();
            }
        }
        return Collections.emptyList();
    }

    private static void failed(int node, Exception e) {
        System.getLogger(NodeMetrics.class.getName()).log(System.Logger.Level.WARNING,
                "node " + node + ": its MBeans could not be registered; it runs without them", e);
    }

    private static void unregister(MBeanServer server, ObjectName n) {
        try {
            server.unregisterMBean(n);
        } catch (InstanceNotFoundException gone) {
            // Someone unregistered it already.
        } catch (JMException | RuntimeException e) {
            System.getLogger(NodeMetrics.class.getName()).log(System.Logger.Level.WARNING, "unregistering " + n, e);
        }
    }

    /** The names this node's MBeans are registered under (core first; empty if registering failed). */
    public List<ObjectName> names() {
        return names;
    }

    /** Stops the statistics line and unregisters the MBeans. */
    @Override
    public void close() {
        if (printer != null) {
            printer.shutdownNow();
        }
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        synchronized (NodeMetrics.class) {
            for (ObjectName n : names) {
                unregister(server, n);
            }
        }
    }
}
