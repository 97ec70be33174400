package io.ibdxnet.ib;

import io.ibdxnet.memory.Memory;
import java.util.Map;

/**
 * Flyweight over an engine's counters table (the native {@code EngineStats}'s
 * slots, described by {@link NativeLayout#counters()}): counter {@code i} is a
 * 64-bit value at {@code address + i * stride}, each on its own cache line,
 * written by the engine threads. Reading one is a volatile load: no JNI call,
 * no allocation. The table outlives the engine (the library keeps it with the
 * engine's handle slot, which is never freed), so a read after {@code close}
 * returns the last values and never touches freed memory.
 */
public final class NativeCounters {
    /**
     * The one counter Java needs by name (the pool's size, for the core's
     * budget): its slot, looked up once; {@link NativeLayout#requireAll}
     * makes a library without it fail at engine start, naming it.
     */
    static final int RECEIVE_BUFFERS = NativeLayout.counters().require("receive_buffers");

    private final long address;
    private final NativeLayout.Counters descriptor;

    NativeCounters(long address, NativeLayout.Counters descriptor) {
        if (address == 0 || address % 8 != 0) {
            throw new IllegalStateException("counters table at " + address + " (library and jar differ?)");
        }
        this.address = address;
        this.descriptor = descriptor;
    }

    /** The descriptor: names, kinds and meanings by slot. */
    public NativeLayout.Counters descriptor() {
        return descriptor;
    }

    /** Number of slots. */
    public int size() {
        return descriptor.size();
    }

    /** The value of slot {@code i} (a volatile load). */
    public long get(int i) {
        if (i < 0 || i >= descriptor.size()) {
            throw new IndexOutOfBoundsException("counter " + i + " of " + descriptor.size());
        }
        return Memory.getLongVolatile(address + (long) i * descriptor.stride + descriptor.valueOffset);
    }

    /** Puts every counter into {@code out} by its name, in slot order. */
    public void putAll(Map<String, Long> out) {
        for (int i = 0; i < descriptor.size(); i++) {
            out.put(descriptor.name(i), get(i));
        }
    }
}
