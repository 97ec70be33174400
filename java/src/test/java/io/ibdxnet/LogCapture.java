package io.ibdxnet;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.LogRecord;

/** A JUL handler that keeps every record it is given (tests add it to the logger they watch). */
public final class LogCapture extends Handler {
    /** The records, in arrival order. */
    public final List<LogRecord> records = new CopyOnWriteArrayList<>();

    @Override
    public void publish(LogRecord r) {
        records.add(r);
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}

    /** The first record whose message contains {@code text}, or null. */
    public LogRecord find(String text) {
        for (LogRecord r : records) {
            if (r.getMessage() != null && r.getMessage().contains(text)) {
                return r;
            }
        }
        return null;
    }
}
