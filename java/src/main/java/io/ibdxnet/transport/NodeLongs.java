package io.ibdxnet.transport;

import java.util.concurrent.atomic.AtomicLongArray;

/** A paged {@link AtomicLongArray} over every 16-bit key (see {@link NodeTable}); unwritten slots are 0. */
public final class NodeLongs extends NodeTable<AtomicLongArray> {
    @Override
    AtomicLongArray newPage() {
        return new AtomicLongArray(PAGE);
    }

    public long get(int i) {
        AtomicLongArray p = peek(i);
        return p == null ? 0 : p.get(i & MASK);
    }

    public void set(int i, long v) {
        AtomicLongArray p = v == 0 ? peek(i) : page(i);
        if (p != null) { // else the slot reads 0 already
            p.set(i & MASK, v);
        }
    }

    public long addAndGet(int i, long delta) {
        return page(i).addAndGet(i & MASK, delta);
    }

    public boolean compareAndSet(int i, long expected, long v) {
        return page(i).compareAndSet(i & MASK, expected, v);
    }
}
