package io.ibdxnet.transport;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.Senders;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The lock-free int queue: full only when full, every value out once. */
public class IntQueueTest {
    @Rule
    public final Timeout timeout = Timeout.seconds(120);

    @Test
    public void fullAtItsCapacityAndEmptyAfter() {
        IntQueue q = new IntQueue(200); // rounded up to 256
        for (int i = 0; i < 256; i++) {
            assertTrue(q.offer(i));
        }
        assertFalse(q.offer(256));
        for (int i = 0; i < 256; i++) {
            assertEquals(i, q.poll());
        }
        assertEquals(-1, q.poll());
        assertTrue(q.isEmpty());
    }

    /**
     * Tokens circulate between the queue and six threads on two cores. A
     * thread preempted between claiming a slot and releasing it used to make
     * an offer one lap later fail as if the queue were full (it held about
     * half its capacity): the receive pool then threw "more buffers returned
     * than lent". No offer may fail, and no token may be lost or doubled.
     */
    @Test
    public void anOfferNeverFailsBelowCapacityWhileConsumersArePreempted() throws Exception {
        int tokens = 200;
        IntQueue q = new IntQueue(tokens);
        for (int i = 0; i < tokens; i++) {
            q.offer(i);
        }
        List<ArrayDeque<Integer>> held = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
            held.add(new ArrayDeque<>());
        }
        Senders.run(6, 300_000, (id, seq) -> {
            ArrayDeque<Integer> mine = held.get(id);
            if (mine.isEmpty() || mine.size() < 60 && ThreadLocalRandom.current().nextBoolean()) {
                int v = q.poll();
                if (v >= 0) {
                    mine.push(v);
                }
            } else if (q.offer(mine.peek())) {
                mine.pop();
            } else {
                throw new AssertionError("offer of " + mine.peek() + " failed below capacity");
            }
        });
        for (ArrayDeque<Integer> mine : held) {
            while (!mine.isEmpty()) {
                assertTrue(q.offer(mine.pop()));
            }
        }
        boolean[] seen = new boolean[tokens];
        int v;
        int n = 0;
        while ((v = q.poll()) >= 0) {
            assertFalse("token " + v + " twice", seen[v]);
            seen[v] = true;
            n++;
        }
        assertEquals("tokens back", tokens, n);
    }
}
