package io.ibdxnet.internal;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.RequestTimeoutException;
import io.ibdxnet.TestSupport;
import io.ibdxnet.core.RateLimitedLog;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Logger;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The timeout path run at start (so a JVM's first real timeout is not late) leaves no trace. */
public class PendingRequestsTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(1);
    private final CoreCounters counters = new CoreCounters();
    private final PendingRequests requests = new PendingRequests(0, counters,
            new RateLimitedLog(Logger.getLogger("test"), 1_000));

    @Test
    public void startLeavesNothingPendingCountedOrNumbered() throws Exception {
        java.lang.reflect.Field next = PendingRequests.class.getDeclaredField("nextRequestId");
        next.setAccessible(true);
        int firstId = ((AtomicInteger) next.get(requests)).get() & Integer.MAX_VALUE;
        try {
            requests.start();
            assertEquals(0, requests.size());
            assertEquals(0, counters.dropped.get());
            assertEquals("the made-up request took no id", firstId, requests.open(1, 1_000, Object.class).requestId);
        } finally {
            requests.close();
        }
    }

    @Test
    public void aRequestFailsWithATimeoutOnceItsDeadlinePassed() throws Exception {
        try {
            requests.start();
            long t0 = System.nanoTime();
            PendingRequests.Pending p = requests.open(1, 50, Object.class);
            try {
                p.future.get(5, TimeUnit.SECONDS);
                throw new AssertionError("answered without an answer");
            } catch (ExecutionException e) {
                assertTrue(e.getCause() instanceof RequestTimeoutException);
                assertTrue(e.getCause().getMessage(), e.getCause().getMessage().contains("within 50 ms"));
            }
            assertTrue("not before its deadline", System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(50));
            assertEquals(0, requests.size());
        } finally {
            requests.close();
        }
    }
}
