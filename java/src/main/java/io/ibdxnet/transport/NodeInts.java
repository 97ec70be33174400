package io.ibdxnet.transport;

import java.util.concurrent.atomic.AtomicIntegerArray;

/** A paged {@link AtomicIntegerArray} over every 16-bit key (see {@link NodeTable}); unwritten slots are 0. */
public final class NodeInts extends NodeTable<AtomicIntegerArray> {
    @Override
    AtomicIntegerArray newPage() {
        return new AtomicIntegerArray(PAGE);
    }

    public int get(int i) {
        AtomicIntegerArray p = peek(i);
        return p == null ? 0 : p.get(i & MASK);
    }

    public void set(int i, int v) {
        AtomicIntegerArray p = v == 0 ? peek(i) : page(i);
        if (p != null) { // else the slot reads 0 already
            p.set(i & MASK, v);
        }
    }

    public boolean compareAndSet(int i, int expect, int update) {
        if (expect == update) {
            return get(i) == expect;
        }
        return page(i).compareAndSet(i & MASK, expect, update);
    }
}
