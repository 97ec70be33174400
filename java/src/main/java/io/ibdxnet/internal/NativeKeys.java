package io.ibdxnet.internal;

import io.ibdxnet.ConfigKey;
import io.ibdxnet.DXNetConfig;
import java.util.Arrays;
import java.util.Collections;
import java.util.Set;
import java.util.TreeSet;

/**
 * How the Java configuration covers each key of the native engine (whose
 * table the library publishes: {@code NativeEngine.defaults()}): set by a
 * {@link DXNetConfig} key ({@link ConfigKey#nativeKey}), derived by the ib
 * transport from Java keys, or the engine's own tuning, given only as
 * {@code native.<key>}. A key added on the native side without a decision
 * here fails {@code ConfigParityTest}: one edit per side.
 */
public final class NativeKeys {
    /** Computed by the ib transport from Java keys (flowControlWindow × flowControlThreshold). */
    public static final Set<String> DERIVED = Collections.unmodifiableSet(new TreeSet<>(Arrays.asList("flow_control_unit")));

    /** The engine's own settings: only as {@code native.<key>}, documented in the README's native table. */
    public static final Set<String> NATIVE_ONLY = Collections.unmodifiableSet(new TreeSet<>(Arrays.asList(
            "fabric", "device", "port", "gid_index", "qp_ack_timeout", "qp_retry_count", "send_ring_size", "sq_size", "srq_size", "recv_buffer_size",
            "recv_sges_per_wr", "recv_buffer_count", "recv_slab_buffers", "incoming_ring_size", "signal_interval", "max_inline",
            "poll_batch", "exchange_retry_ms", "discovery_interval_ms", "parking_yield_after_ms",
            "parking_park_after_ms", "parking_park_for_ns", "parking_sleep_after_us", "pin_threads", "engine_threads", "send_from_caller",
            "send_from_caller_max_bytes", "recv_from_caller", "stats_timers",
            "evict_at_limit",
            "stats_print_interval_ms")));

    private NativeKeys() {
    }

    /** The native keys a {@link DXNetConfig} key sets. */
    public static Set<String> setByJava() {
        Set<String> out = new TreeSet<>();
        for (ConfigKey k : DXNetConfig.KEYS) {
            if (k.nativeKey != null) {
                out.add(k.nativeKey);
            }
        }
        return out;
    }

    /** Every key of the native engine, as the Java side knows them ({@link #mismatches} is empty for the library's). */
    public static Set<String> all() {
        Set<String> out = setByJava();
        out.addAll(DERIVED);
        out.addAll(NATIVE_ONLY);
        return Collections.unmodifiableSet(out);
    }

    /**
     * What does not match between the library's keys and this
     * classification: an empty string when every native key is covered once
     * and every key named here exists.
     */
    public static String mismatches(Set<String> nativeKeys) {
        StringBuilder s = new StringBuilder();
        Set<String> covered = new TreeSet<>();
        for (Set<String> group : Arrays.asList(setByJava(), DERIVED, NATIVE_ONLY)) {
            for (String k : group) {
                if (!covered.add(k)) {
                    s.append("native key ").append(k).append(" is classified twice; ");
                }
            }
        }
        for (String k : nativeKeys) {
            if (!covered.contains(k)) {
                s.append("native key ").append(k).append(" has no Java side: give it a DXNetConfig key (setsNative) ")
                        .append("or add it to NativeKeys.DERIVED or NATIVE_ONLY; ");
            }
        }
        for (String k : covered) {
            if (!nativeKeys.contains(k)) {
                s.append(k).append(" is not a key of the native engine; ");
            }
        }
        return s.toString();
    }
}
