package io.ibdxnet.transport;

import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * Write interest manager (paper §8.2, Figure 9): a lock-free queue of node
 * ids with ready-to-send data or flow-control data. A node is queued at most
 * once (its flag goes 0 → 1), so the queue is bounded by the number of nodes
 * and nodes are served round-robin in the order they became ready. The
 * paper's per-node interest counters are left out: every send thread looks
 * at a served node's ring and confirmations itself, so nothing read them.
 * The array queue has room for {@link #QUEUE} nodes (not every possible id:
 * a node talks to a few); beyond, nodes wait in an overflow queue, and while
 * it holds any, newly ready nodes queue behind them there (so order holds
 * and none is passed over for long).
 */
public final class WriteInterestManager {
    /** Nodes the array queue holds. */
    static final int QUEUE = 1024;
    private final IntQueue queue = new IntQueue(QUEUE);
    private final ConcurrentLinkedQueue<Integer> overflow = new ConcurrentLinkedQueue<>();
    private final NodeInts queued = new NodeInts();

    /**
     * Any thread: {@code node} has ready-to-send data (already published).
     * Fast path: if the node is queued, the send thread will look at it after
     * clearing the flag, and so see this data; no shared write needed.
     */
    public void pushData(int node) {
        if (queued.get(node) != 0) {
            return;
        }
        enqueue(node);
    }

    /** Any thread: {@code node} has flow-control data to send. */
    public void pushFlowControl(int node) {
        enqueue(node);
    }

    private void enqueue(int node) {
        if (queued.compareAndSet(node, 0, 1) && (!overflow.isEmpty() || !queue.offer(node))) {
            overflow.add(node);
        }
    }

    /**
     * Send thread: the next queued node, or {@code -1}. The caller looks at
     * the node's ring and owed confirmations itself: anything pushed after
     * this call queues the node again.
     */
    public int next() {
        int node = queue.poll();
        if (node < 0) {
            Integer o = overflow.poll(); // older than anything queued after it began to fill
            if (o == null) {
                return -1;
            }
            node = o;
        }
        // Clear the flag before the caller looks at the data: anything
        // published after this point queues the node again.
        queued.set(node, 0);
        return node;
    }

    /** True if no node is queued (see {@link IntQueue#isEmpty}). */
    public boolean isEmpty() {
        return queue.isEmpty() && overflow.isEmpty();
    }
}
