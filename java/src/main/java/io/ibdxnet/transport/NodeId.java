package io.ibdxnet.transport;

/**
 * Node ids: 16 bits on every wire (ib immediate data and work packages, nio
 * handshake), so per-node state is a table of {@link #COUNT} slots indexed by
 * id ({@link NodeTable}: paged, a page allocated where a slot is written), not a map. {@link #NONE} is the all-ones id the native side uses for
 * "no node"; a configured node id is {@link #MIN}..{@link #MAX}.
 */
public final class NodeId {
    /** Slots in a per-node array: every 16-bit id. */
    public static final int COUNT = 1 << 16;
    /** "No node" (all ones); never a configured id. */
    public static final int NONE = COUNT - 1;
    public static final int MIN = 0;
    public static final int MAX = NONE - 1;

    private NodeId() {}

    /** True for an id a node may have ({@link #MIN}..{@link #MAX}). */
    public static boolean isValid(int node) {
        return node >= MIN && node <= MAX;
    }
}
