package io.ibdxnet.internal;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.DXNetConfig;
import io.ibdxnet.ib.NativeEngine;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The native key table (published by the library) and the Java
 * configuration agree: every native key has a Java side, every Java key that
 * sets a native one names a real key, and both give it the same default.
 */
public class ConfigParityTest {
    @Rule
    public final Timeout timeout = Timeout.seconds(30);

    @Test
    public void everyNativeKeyHasAJavaSide() {
        assertEquals("", NativeKeys.mismatches(NativeEngine.defaults().keySet()));
    }

    /** The check itself: a key added on the native side alone, or a Java name without a native key, is named. */
    @Test
    public void aNativeKeyWithoutAJavaSideIsNamed() {
        Set<String> keys = new TreeSet<>(NativeEngine.defaults().keySet());
        keys.add("new_engine_knob");
        String m = NativeKeys.mismatches(keys);
        assertTrue(m, m.contains("native key new_engine_knob has no Java side"));
        keys.remove("new_engine_knob");
        keys.remove("sq_size");
        m = NativeKeys.mismatches(keys);
        assertTrue(m, m.contains("sq_size is not a key of the native engine"));
    }

    /** Java's default for a key it sets natively is the engine's default (one value, not two). */
    @Test
    public void javaKeysThatSetNativeOnesDefaultAlike() {
        Map<String, String> native_ = NativeEngine.defaults();
        DXNetConfig c = new DXNetConfig(0);
        assertEquals(native_.get("node_id"), Integer.toString(c.nodeId));
        assertEquals(native_.get("max_connections"), Integer.toString(c.maxConnections));
        assertEquals(native_.get("connect_timeout_ms"), Integer.toString(c.connectTimeoutMs));
    }
}
