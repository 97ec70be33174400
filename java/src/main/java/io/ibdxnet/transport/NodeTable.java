package io.ibdxnet.transport;

import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * Per-node state indexed by a 16-bit key (a node id, or a message type and
 * subtype) in pages of {@link #PAGE} slots, a page allocated on its first
 * write: a node that talks to a few peers holds a few pages instead of
 * {@link NodeId#COUNT} slots per table (a full table of longs is 512 KiB,
 * and a node had a dozen). A slot never written reads as 0 or null. Pages
 * are never freed. Subclasses give the slot operations of the
 * {@code java.util.concurrent.atomic} array they page.
 */
abstract class NodeTable<P> {
    static final int SHIFT = 8;
    /** Slots per page. */
    static final int PAGE = 1 << SHIFT;
    static final int MASK = PAGE - 1;
    private final AtomicReferenceArray<P> pages = new AtomicReferenceArray<>(NodeId.COUNT >>> SHIFT);

    abstract P newPage();

    /** The page of key {@code i}, or null if none was written (reads then see the default). */
    final P peek(int i) {
        return pages.get(i >>> SHIFT);
    }

    /** The page of key {@code i}, allocated (once, by whichever thread wins) if needed. */
    final P page(int i) {
        int k = i >>> SHIFT;
        P p = pages.get(k);
        if (p == null) {
            P fresh = newPage();
            p = pages.compareAndExchange(k, null, fresh);
            if (p == null) {
                p = fresh;
            }
        }
        return p;
    }

    /** Keys: every 16-bit value. */
    public final int length() {
        return NodeId.COUNT;
    }

    /** Pages allocated so far (for tests). */
    final int pages() {
        int n = 0;
        for (int k = 0; k < pages.length(); k++) {
            n += pages.get(k) != null ? 1 : 0;
        }
        return n;
    }
}
