package io.ibdxnet.ib;

/**
 * The kinds of {@link EngineCallbacks#nodeEvent}, as the native library
 * defines them (read from its table, see {@link NativeLayout}). A class of
 * their own, not fields of {@code EngineCallbacks}: the library looks that
 * interface up while it loads, before the table can be read.
 */
public final class NodeEvents {
    private NodeEvents() {}

    /** A node was discovered. */
    public static final int DISCOVERED = (int) NativeLayout.constant("EVENT_DISCOVERED");
    /** A node was invalidated (removed, or its address changed). */
    public static final int INVALIDATED = (int) NativeLayout.constant("EVENT_INVALIDATED");
    /** The connection to a node failed. */
    public static final int DISCONNECTED = (int) NativeLayout.constant("EVENT_DISCONNECTED");
    /** An established connection was closed in order (eviction, replacement): not a failure. */
    public static final int CLOSED = (int) NativeLayout.constant("EVENT_CLOSED");
    /** Data in flight on a connection closed in order did not arrive (the node's requests fail). */
    public static final int LOST = (int) NativeLayout.constant("EVENT_LOST");
    /**
     * The peer shut down: as {@link #DISCONNECTED}, and the event's value is
     * how many bytes we sent on the connection it handled beyond its last
     * flow-control confirmation ({@link #LEFT_HANDLED_UNKNOWN}: it did not say).
     */
    public static final int LEFT = (int) NativeLayout.constant("EVENT_LEFT");
    /** The value of a {@link #LEFT} whose peer did not say what it handled (negative). */
    public static final long LEFT_HANDLED_UNKNOWN = NativeLayout.constant("LEFT_HANDLED_UNKNOWN");
}
