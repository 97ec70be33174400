package io.ibdxnet.ib;

import java.lang.System.Logger;
import java.lang.System.Logger.Level;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * One log: the native engine's records go to {@link System#getLogger} with
 * the Rust target as the logger name ({@code ibdxnet::con::manager} becomes
 * {@code ibdxnet.con.manager}) and the same level, so JUL, log4j and SLF4J
 * configurations capture them. The engine never calls Java to log: its
 * records wait in a bounded native queue (full: dropped and counted, the
 * count logged as a warning on {@code ibdxnet.jni.logbridge}) that one
 * daemon thread, {@code ibdxnet-native-log}, drains. Which levels the engine
 * formats at all follows the levels the loggers enable, re-read every
 * {@value #LEVEL_REFRESH_MS} ms. With {@code RUST_LOG} set, the library keeps
 * its records on stderr, filtered by {@code RUST_LOG}, as without the jar.
 */
public final class NativeLog {
    /** How often the drain thread re-reads the loggers' levels. */
    static final int LEVEL_REFRESH_MS = 1000;
    /** How long one drain call waits for a record. */
    private static final int WAIT_MS = 200;
    private static final Level[] LEVELS = {Level.OFF, Level.ERROR, Level.WARNING, Level.INFO, Level.DEBUG, Level.TRACE};

    private static final CountDownLatch STARTED = new CountDownLatch(1);
    private static volatile boolean toJava;
    private static volatile List<String> names = Collections.emptyList();
    private static Thread thread;

    private NativeLog() {}

    /** Starts the drain thread once (called after the library is loaded). */
    static synchronized void start() {
        if (thread != null) {
            return;
        }
        names = Collections.unmodifiableList(Arrays.asList(IbdxnetNative.logTargets().split("\n")));
        thread = new Thread(NativeLog::run, "ibdxnet-native-log");
        thread.setDaemon(true);
        thread.start();
    }

    /**
     * Whether the native records reach {@link System.Logger} (false with
     * {@code RUST_LOG} set: they stay on stderr); waits for the drain thread
     * to decide, up to 10 s.
     */
    public static boolean toSystemLogger() {
        IbdxnetNative.logTargets(); // loads the library, which starts the thread
        try {
            STARTED.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return toJava;
    }

    /** The logger names the native library logs on. */
    public static List<String> loggerNames() {
        IbdxnetNative.logTargets();
        return names;
    }

    /**
     * Re-reads the loggers' levels now (after a configuration change; the
     * drain thread also does every {@value #LEVEL_REFRESH_MS} ms).
     */
    public static void refreshLevels() {
        if (toSystemLogger()) {
            IbdxnetNative.logLevel(enabledLevel());
        }
    }

    /** The most verbose level any of the library's loggers enables, as the native number. */
    static int enabledLevel() {
        int most = 0;
        for (String n : names) {
            Logger l = System.getLogger(n);
            for (int v = LEVELS.length - 1; v > most; v--) {
                if (l.isLoggable(LEVELS[v])) {
                    most = v;
                    break;
                }
            }
        }
        return most;
    }

    private static void run() {
        try {
            toJava = IbdxnetNative.logStart(enabledLevel());
        } catch (Throwable t) {
            toJava = false;
        } finally {
            STARTED.countDown();
        }
        if (!toJava) {
            return;
        }
        Map<String, Logger> loggers = new HashMap<>();
        long nextRefresh = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LEVEL_REFRESH_MS);
        while (true) {
            try {
                if (System.nanoTime() - nextRefresh >= 0) {
                    IbdxnetNative.logLevel(enabledLevel());
                    nextRefresh = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LEVEL_REFRESH_MS);
                }
                String[] r = IbdxnetNative.logDrain(WAIT_MS);
                for (int i = 0; i + 2 < r.length; i += 3) {
                    publish(loggers, r[i], r[i + 1], r[i + 2]);
                }
            } catch (Throwable t) {
                // Never lose the thread; do not spin if the library keeps failing.
                try {
                    Thread.sleep(WAIT_MS);
                } catch (InterruptedException e) {
                    // A daemon nobody interrupts on purpose: keep draining.
                }
            }
        }
    }

    private static void publish(Map<String, Logger> loggers, String level, String name, String message) {
        int v;
        try {
            v = Integer.parseInt(level);
        } catch (NumberFormatException e) {
            v = 2;
        }
        Level l = LEVELS[Math.max(1, Math.min(v, LEVELS.length - 1))];
        try {
            loggers.computeIfAbsent(name, System::getLogger).log(l, message);
        } catch (RuntimeException e) {
            // The application's handler failed on this record: drop it.
        }
    }
}
