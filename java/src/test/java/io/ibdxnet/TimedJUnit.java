package io.ibdxnet;

import java.util.ArrayList;
import java.util.List;
import org.junit.runner.Description;
import org.junit.runner.JUnitCore;
import org.junit.runner.Request;
import org.junit.runner.Result;
import org.junit.runner.notification.Failure;
import org.junit.runner.notification.RunListener;

/**
 * JUnitCore with one line per test and its duration: the Soft-RoCE VM runs
 * take minutes, and CI's log must say which test took them.
 */
public final class TimedJUnit {
    private TimedJUnit() {}

    /** Arguments: test classes, or one {@code Class#method} to run a single test. */
    public static void main(String[] args) throws ClassNotFoundException {
        List<Class<?>> classes = new ArrayList<>();
        Request single = null;
        for (String a : args) {
            int hash = a.indexOf('#');
            if (hash >= 0) {
                single = Request.method(Class.forName(a.substring(0, hash)), a.substring(hash + 1));
            } else {
                classes.add(Class.forName(a));
            }
        }
        JUnitCore core = new JUnitCore();
        core.addListener(new RunListener() {
            private long start;
            private boolean failed;

            @Override
            public void testStarted(Description d) {
                start = System.nanoTime();
                failed = false;
                System.err.printf("-- %s.%s started%n", d.getTestClass().getSimpleName(), d.getMethodName());
            }

            @Override
            public void testFailure(Failure f) {
                failed = true;
                System.err.println(f.getTrace());
            }

            @Override
            public void testAssumptionFailure(Failure f) {
                System.err.println("   skipped: " + f.getMessage());
            }

            @Override
            public void testFinished(Description d) {
                System.err.printf("-- %s.%s: %s in %.1f s%n", d.getTestClass().getSimpleName(), d.getMethodName(),
                        failed ? "FAILED" : "ok", (System.nanoTime() - start) / 1e9);
            }
        });
        Result r = single != null ? core.run(single) : core.run(classes.toArray(new Class<?>[0]));
        System.err.printf("%d tests, %d failed, %d skipped, %.1f s%n", r.getRunCount(), r.getFailureCount(),
                r.getIgnoreCount() + r.getAssumptionFailureCount(), r.getRunTime() / 1e3);
        System.exit(r.wasSuccessful() ? 0 : 1);
    }
}
