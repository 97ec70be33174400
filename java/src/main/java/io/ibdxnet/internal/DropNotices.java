package io.ibdxnet.internal;

import io.ibdxnet.transport.NodeRefs;
import java.util.LinkedHashSet;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * The drops of plain messages this node could not hand to anyone (no
 * receiver for their type, their type not registered, or no message could be
 * created from their payload), summed per source node until its source is
 * told ({@link DropNotice}). Per source at most one notice per
 * {@link #INTERVAL_MS}: the first drop after a quiet interval is told at
 * once; the drops that follow within the interval are summed (messages,
 * payload bytes, up to {@link #MAX_CAUSES} distinct causes) and told when the
 * interval ends. A peer that keeps sending what nobody here handles thus
 * costs one small send per interval at most.
 *
 * <p>{@link #dropped} is called on the receive path (the coordinator, a
 * transport's receiving thread, or a thread sending to its own node), the
 * interval's end on the timer thread; neither waits for the other beyond a
 * short lock per source, and {@link Out#tell} runs outside it.
 */
public final class DropNotices {
    /** At most one notice per source in this many milliseconds. */
    public static final long INTERVAL_MS = 100;
    /** Distinct causes named in one notice; the messages of others are counted ("N more messages for other causes"). */
    static final int MAX_CAUSES = 4;

    /** Tells {@code source} what was dropped of its messages; must not block. */
    public interface Out {
        void tell(int source, long messages, long bytes, String causes);
    }

    /** Runs {@code r} in {@code delayMs} on another thread. */
    public interface Timer {
        void later(long delayMs, Runnable r);
    }

    /** What was dropped of one source's messages since it was last told. */
    private static final class Source {
        long messages;
        long bytes;
        final LinkedHashSet<String> causes = new LinkedHashSet<>();
        long moreCauses;
        /** When it was last told ({@link #clock}); valid once {@link #told}. */
        long lastTold;
        boolean told;
        /** The interval's end is scheduled: drops until then are summed. */
        boolean scheduled;

        /** What is summed, as a notice; cleared. */
        Notice take(long now) {
            Notice n = new Notice(messages, bytes,
                    String.join("; ", causes) + (moreCauses > 0 ? "; " + moreCauses + " more messages for other causes" : ""));
            messages = 0;
            bytes = 0;
            causes.clear();
            moreCauses = 0;
            lastTold = now;
            told = true;
            return n;
        }
    }

    /** One notice's fields. */
    private static final class Notice {
        final long messages;
        final long bytes;
        final String causes;

        Notice(long messages, long bytes, String causes) {
            this.messages = messages;
            this.bytes = bytes;
            this.causes = causes;
        }
    }

    private final NodeRefs<Source> sources = new NodeRefs<>();
    private final Out out;
    private final Timer timer;
    private final LongSupplier clock;
    private final long intervalNanos;

    /** {@code clock} in nanoseconds ({@link System#nanoTime}, or a test's). */
    public DropNotices(Out out, Timer timer, LongSupplier clock) {
        this.out = out;
        this.timer = timer;
        this.clock = clock;
        this.intervalNanos = TimeUnit.MILLISECONDS.toNanos(INTERVAL_MS);
    }

    /**
     * A plain message of {@code source} with {@code bytes} of payload was
     * dropped here for {@code cause} (which names its type): told now, or
     * with the others at the end of the interval.
     */
    public void dropped(int source, String cause, long bytes) {
        Source s = sources.get(source);
        if (s == null) {
            sources.compareAndSet(source, null, new Source());
            s = sources.get(source);
        }
        Notice now;
        long wait;
        synchronized (s) {
            s.messages++;
            s.bytes += bytes;
            if (s.causes.size() < MAX_CAUSES || s.causes.contains(cause)) {
                s.causes.add(cause);
            } else {
                s.moreCauses++;
            }
            if (s.scheduled) {
                return; // summed: told at the interval's end
            }
            long t = clock.getAsLong();
            wait = s.told ? s.lastTold + intervalNanos - t : 0;
            if (wait > 0) {
                s.scheduled = true;
                now = null;
            } else {
                now = s.take(t);
            }
        }
        if (now != null) {
            tell(source, now);
        } else {
            Source summed = s;
            timer.later(Math.max(1, TimeUnit.NANOSECONDS.toMillis(wait + 999_999)), () -> endOfInterval(source, summed));
        }
    }

    /** Timer thread: tells what was summed during the interval. */
    private void endOfInterval(int source, Source s) {
        Notice n;
        synchronized (s) {
            s.scheduled = false;
            if (s.messages == 0) {
                return;
            }
            n = s.take(clock.getAsLong());
        }
        tell(source, n);
    }

    private void tell(int source, Notice n) {
        out.tell(source, n.messages, n.bytes, n.causes);
    }
}
