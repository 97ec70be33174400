package io.ibdxnet.ib;

import io.ibdxnet.transport.Confirmations;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * The ib transport's settings, typed and immutable: the values the Java side
 * of the transport uses, and the native engine's key/value table (handed to
 * the engine as it is at its creation). Built once per node, from the
 * configuration, by {@code internal.Transports.ibSettings} — whatever
 * transport the node finally uses, so a wrong {@code native.*} key fails
 * the start on nio and loopback as on ib — and checked when built: every
 * key is one of the engine's (the names are known on the Java side, see
 * {@code internal.NativeKeys}; their values are the engine's to check),
 * {@code connect_timeout_ms} is a number, and {@code flow_control_unit}
 * (derived from the flow control window) is not contradicted.
 */
public final class IbSettings {
    /** Prefix of the node-table entries of the engine's table ({@code node.<id>}). */
    private static final String NODE = "node.";

    /** Bytes a sender may have unconfirmed towards one peer. */
    public final long flowControlWindow;
    /** The confirmation unit: window × threshold, sent to each peer in the connection exchange. */
    public final long flowControlUnit;
    /** How long a send waits for its connection ({@code connect_timeout_ms}). */
    public final int connectTimeoutMs;
    /** The fabric the configuration names ({@code native.fabric}), or null: the engine's default. */
    public final String fabric;
    private final Map<String, String> engine;

    /**
     * Checks and takes {@code engineKeys} (the native table the configuration
     * makes: its {@code native.*} keys and the native keys of Java keys).
     *
     * @param engineKeys native key to value; copied
     * @param flowControlWindow the flow control window in bytes
     * @param flowControlThreshold the share of the window that makes a confirmation unit
     * @param knownKeys every key of the native engine ({@code node.<id>} entries need not be listed)
     * @throws IllegalArgumentException naming the first wrong key as {@code native.<key>}
     */
    public IbSettings(Map<String, String> engineKeys, long flowControlWindow, double flowControlThreshold, Set<String> knownKeys) {
        long flowControlUnit = Confirmations.unit(flowControlWindow, flowControlThreshold);
        for (String k : engineKeys.keySet()) {
            if (!knownKeys.contains(k) && !isNodeEntry(k)) {
                String near = nearest(k, knownKeys);
                throw new IllegalArgumentException("unknown configuration key 'native." + k + "'"
                        + (near == null ? "" : " (did you mean 'native." + near + "'?)"));
            }
        }
        String given = engineKeys.get("flow_control_unit");
        if (given != null && !given.trim().equals(Long.toString(flowControlUnit))) {
            throw new IllegalArgumentException("native.flow_control_unit = '" + given.trim() + "' contradicts flowControlWindow"
                    + " × flowControlThreshold = " + flowControlUnit + ": it is set from them; give only those");
        }
        String timeout = engineKeys.get("connect_timeout_ms");
        try {
            this.connectTimeoutMs = Integer.parseInt(timeout == null ? "" : timeout.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("native.connect_timeout_ms = '" + timeout + "': not a number of milliseconds");
        }
        Map<String, String> out = new LinkedHashMap<>(engineKeys);
        out.put("flow_control_unit", Long.toString(flowControlUnit));
        this.engine = Collections.unmodifiableMap(out);
        this.flowControlWindow = flowControlWindow;
        this.flowControlUnit = flowControlUnit;
        String f = engineKeys.get("fabric");
        this.fabric = f == null ? null : f.trim();
    }

    /** The native engine's key/value table (unmodifiable), as the engine receives it at creation. */
    public Map<String, String> engineTable() {
        return engine;
    }

    private static boolean isNodeEntry(String k) {
        if (!k.startsWith(NODE) || k.length() == NODE.length()) {
            return false;
        }
        for (int i = NODE.length(); i < k.length(); i++) {
            if (!Character.isDigit(k.charAt(i))) {
                return false;
            }
        }
        return true;
    }

    /** The known key closest to {@code k} (edit distance at most 2), or null. */
    private static String nearest(String k, Set<String> known) {
        String best = null;
        int bestDistance = 3;
        for (String c : known) {
            int d = distance(k, c);
            if (d < bestDistance) {
                best = c;
                bestDistance = d;
            }
        }
        return best;
    }

    private static int distance(String a, String b) {
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int sub = prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                cur[j] = Math.min(sub, Math.min(prev[j], cur[j - 1]) + 1);
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }
}
