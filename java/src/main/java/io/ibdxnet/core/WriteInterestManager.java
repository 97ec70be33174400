package io.ibdxnet.core;

import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * Write interest manager (paper §8.2, Figure 9): a lock-free queue of node
 * ids with ready-to-send data or flow-control data, plus per-node atomic
 * interest counters. A node is queued at most once (its flag goes 0 → 1), so
 * the queue is bounded by the number of nodes and nodes are served
 * round-robin in the order they became ready.
 */
public final class WriteInterestManager {
    private static final int NODES = 1 << 16;
    private final IntQueue queue = new IntQueue(NODES);
    private final AtomicIntegerArray queued = new AtomicIntegerArray(NODES);
    private final AtomicIntegerArray data = new AtomicIntegerArray(NODES);
    private final AtomicIntegerArray flowControl = new AtomicIntegerArray(NODES);

    /** Any thread: {@code node} has ready-to-send data. */
    public void pushData(int node) {
        data.incrementAndGet(node);
        enqueue(node);
    }

    /** Any thread: {@code node} has flow-control data to send. */
    public void pushFlowControl(int node) {
        flowControl.incrementAndGet(node);
        enqueue(node);
    }

    private void enqueue(int node) {
        if (queued.compareAndSet(node, 0, 1) && !queue.offer(node)) {
            throw new IllegalStateException("write interest queue overflow"); // bounded by the node count
        }
    }

    /**
     * Send thread: the next node with interests, or {@code -1}. {@code counts}
     * receives {data interests, flow-control interests}, which are reset.
     */
    public int next(int[] counts) {
        while (true) {
            int node = queue.poll();
            if (node < 0) {
                return -1;
            }
            // Clear the flag before taking the counters: an interest added
            // after this point queues the node again instead of being lost.
            queued.set(node, 0);
            int d = data.getAndSet(node, 0);
            int f = flowControl.getAndSet(node, 0);
            if (d != 0 || f != 0) {
                counts[0] = d;
                counts[1] = f;
                return node;
            }
        }
    }
}
