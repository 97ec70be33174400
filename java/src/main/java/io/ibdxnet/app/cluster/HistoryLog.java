package io.ibdxnet.app.cluster;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * One node incarnation's history file: one event per line, fields separated
 * by tabs, the first two always the event's kind and its wall-clock time in
 * milliseconds. {@link HistoryReader} parses what this writes; the kinds:
 *
 * <pre>
 * start      t node incarnation transport
 * send       t dest seq len crc ok|fail [REASON message]
 * loss       t node bytes reason            (DXNet.LossListener: bytes to node may be lost)
 * conn       t node up|down                 (DXNet.ConnectionListener, for reading only)
 * recv       t sender senderIncarnation seq len crc ok|bad
 * req        t dest rseq deadlineMs
 * reqend     t dest rseq answered|badanswer|failed|pending [REASON message]
 * reqhandled t sender senderIncarnation rseq ok|bad
 * drain      t dest answered|failed [why]   (HistoryNode's end: dest handled all we sent before)
 * drained    t peer                         (a peer's drain answered here)
 * tick       t                              (every FLUSH_MS: the process ran then)
 * stats      t key=value key=value ...      (DXNet.transportStats as the node stops the orderly way)
 * note       t text
 * end        t why
 * </pre>
 *
 * Durability is chosen per kind, for the crash the checker must judge: a
 * {@code recv}, {@code reqhandled} and {@code loss} line reaches the kernel
 * (a {@code write}) before the handler or listener returns, so a SIGKILL
 * after a message was handled cannot make it look lost; the other lines are
 * buffered and flushed every {@link #FLUSH_MS} ms, so a killed node may miss
 * its last sends (the checker treats those as unrecorded, not as lost). A
 * file without an {@code end} line is a crashed incarnation's.
 */
public final class HistoryLog implements AutoCloseable {
    /** The longest a buffered line waits before it is written. */
    static final int FLUSH_MS = 100;

    private final BufferedWriter out;
    /**
     * Lines not written yet, in the order they were stamped. A buffered
     * event only queues its line: no caller waits for I/O (a flush to a
     * VM's 9p share took seconds, and a sender stamped before it waited for
     * the lock, or a request's timeout waited in its callback, looked late).
     */
    private final ConcurrentLinkedQueue<String> pending = new ConcurrentLinkedQueue<>();
    /** Held while writing to {@link #out}. */
    private final Object io = new Object();
    private volatile boolean closed;

    public HistoryLog(Path file) throws IOException {
        Path dir = file.toAbsolutePath().getParent();
        if (dir != null) {
            Files.createDirectories(dir);
        }
        this.out = Files.newBufferedWriter(file, StandardCharsets.UTF_8);
        Thread flusher = new Thread(this::flushPeriodically, "history-flush");
        flusher.setDaemon(true);
        flusher.start();
    }

    /** A buffered event, now. */
    public void write(String kind, Object... fields) {
        queue(System.currentTimeMillis(), kind, fields);
    }

    /**
     * A buffered event that took place at {@code timeMs}: a send is dated
     * when it began, so a loss reported while the call was still under way
     * is not taken for one that came before the message.
     */
    public void writeAt(long timeMs, String kind, Object... fields) {
        queue(timeMs, kind, fields);
    }

    /** An event written through to the kernel before this returns (with every line queued before it). */
    public void writeNow(String kind, Object... fields) {
        queue(System.currentTimeMillis(), kind, fields);
        synchronized (io) {
            drain(true);
        }
    }

    private void queue(long timeMs, String kind, Object... fields) {
        if (closed) {
            return; // a late callback after the end: the file is complete without it
        }
        StringBuilder b = new StringBuilder(64).append(kind).append('\t').append(timeMs);
        for (Object f : fields) {
            b.append('\t').append(clean(String.valueOf(f)));
        }
        pending.add(b.append('\n').toString());
    }

    /** Under {@link #io}: writes the queued lines, in order; with {@code flush}, to the kernel. */
    private void drain(boolean flush) {
        if (closed) {
            return;
        }
        try {
            for (String line; (line = pending.poll()) != null;) {
                out.write(line);
            }
            if (flush) {
                out.flush();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Tabs and line breaks inside a field (a reason's text) would break the line format. */
    private static String clean(String s) {
        return s.replace('\t', ' ').replace('\n', ' ').replace('\r', ' ');
    }

    private void flushPeriodically() {
        while (true) {
            try {
                Thread.sleep(FLUSH_MS);
            } catch (InterruptedException e) {
                return;
            }
            if (closed) {
                return;
            }
            queue(System.currentTimeMillis(), "tick");
            synchronized (io) {
                try {
                    drain(true);
                } catch (UncheckedIOException e) {
                    return; // the writing threads see the failure themselves
                }
            }
        }
    }

    /** Writes {@code end} and closes the file; later events are ignored. */
    public void end(String why) {
        synchronized (io) {
            if (closed) {
                return;
            }
            queue(System.currentTimeMillis(), "end", why);
            drain(false);
            closed = true;
            try {
                out.close();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    @Override
    public void close() {
        end("closed");
    }
}
