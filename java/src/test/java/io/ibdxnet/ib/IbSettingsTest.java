package io.ibdxnet.ib;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** {@link IbSettings}: typed, immutable, every key checked when built (no native library needed). */
public class IbSettingsTest {
    @Rule
    public final Timeout timeout = Timeout.seconds(30);

    private static final Set<String> KNOWN = new TreeSet<>(Arrays.asList("connect_timeout_ms", "fabric", "flow_control_unit",
            "listen", "sq_size", "srq_size"));

    private static Map<String, String> table(String... kv) {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("connect_timeout_ms", "2000");
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    private static String refusal(Map<String, String> t) {
        try {
            new IbSettings(t, 1 << 20, 0.5, KNOWN);
        } catch (IllegalArgumentException e) {
            return e.getMessage();
        }
        fail("accepted " + t);
        return null;
    }

    @Test
    public void typedValuesAndTheEngineTable() {
        Map<String, String> t = table("fabric", " sim ", "sq_size", "64", "node.3", "10.0.0.3:5730");
        IbSettings s = new IbSettings(t, 1 << 20, 0.5, KNOWN);
        assertEquals(2000, s.connectTimeoutMs);
        assertEquals(1 << 20, s.flowControlWindow);
        assertEquals(1 << 19, s.flowControlUnit);
        assertEquals("sim", s.fabric);
        assertEquals("64", s.engineTable().get("sq_size"));
        assertEquals("10.0.0.3:5730", s.engineTable().get("node.3"));
        assertEquals("the unit goes to the engine", Long.toString(1 << 19), s.engineTable().get("flow_control_unit"));
        t.put("sq_size", "128");
        assertEquals("a copy: later changes of the map do not reach it", "64", s.engineTable().get("sq_size"));
        try {
            s.engineTable().put("sq_size", "1");
            fail("the table is immutable");
        } catch (UnsupportedOperationException expected) {
            // immutable
        }
        assertNull(new IbSettings(table(), 1 << 20, 0.5, KNOWN).fabric);
    }

    @Test
    public void everyKeyIsCheckedWhenBuilt() {
        assertEquals("unknown configuration key 'native.sq_sise' (did you mean 'native.sq_size'?)",
                refusal(table("sq_sise", "8")));
        assertEquals("unknown configuration key 'native.completely_else'", refusal(table("completely_else", "8")));
        assertEquals("unknown configuration key 'native.node.x'", refusal(table("node.x", "10.0.0.1:1")));
        String e = refusal(table("flow_control_unit", "4096"));
        assertTrue(e, e.startsWith("native.flow_control_unit = '4096' contradicts flowControlWindow × flowControlThreshold = 524288"));
        new IbSettings(table("flow_control_unit", "524288"), 1 << 20, 0.5, KNOWN); // the same value: no contradiction
        e = refusal(table("connect_timeout_ms", "soon"));
        assertEquals("native.connect_timeout_ms = 'soon': not a number of milliseconds", e);
    }
}
