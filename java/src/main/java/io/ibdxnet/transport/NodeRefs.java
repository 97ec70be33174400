package io.ibdxnet.transport;

import java.util.concurrent.atomic.AtomicReferenceArray;

/** A paged {@link AtomicReferenceArray} over every 16-bit key (see {@link NodeTable}); unwritten slots are null. */
public final class NodeRefs<T> extends NodeTable<AtomicReferenceArray<T>> {
    @Override
    AtomicReferenceArray<T> newPage() {
        return new AtomicReferenceArray<>(PAGE);
    }

    public T get(int i) {
        AtomicReferenceArray<T> p = peek(i);
        return p == null ? null : p.get(i & MASK);
    }

    public void set(int i, T v) {
        AtomicReferenceArray<T> p = v == null ? peek(i) : page(i);
        if (p != null) { // else the slot is null already
            p.set(i & MASK, v);
        }
    }

    public T getAndSet(int i, T v) {
        AtomicReferenceArray<T> p = v == null ? peek(i) : page(i);
        return p == null ? null : p.getAndSet(i & MASK, v);
    }

    /** Sets {@code update} if the slot holds {@code expect}; returns what it held. */
    public T compareAndExchange(int i, T expect, T update) {
        if (expect == update) {
            return get(i);
        }
        return page(i).compareAndExchange(i & MASK, expect, update);
    }

    public boolean compareAndSet(int i, T expect, T update) {
        if (expect == update) {
            return get(i) == expect;
        }
        return page(i).compareAndSet(i & MASK, expect, update);
    }
}
