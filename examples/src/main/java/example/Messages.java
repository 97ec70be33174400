package example;

import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.Request;
import io.ibdxnet.Response;

/** The example's messages: an event carrying a value, and a request for the running count and sum. */
public final class Messages {
    static final byte TYPE = 1;
    static final byte EVENT = 1;
    static final byte SUM = 2;
    static final byte SUM_REPLY = 3;

    private Messages() {}

    /** One event of the stream. */
    public static final class Event extends Message {
        long value;

        public Event() {
            super(TYPE, EVENT);
        }

        Event(int to, long value) {
            super(to, TYPE, EVENT);
            this.value = value;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeLong(value);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            value = in.readLong();
        }
    }

    /** "How many events, and their sum?" */
    public static final class Sum extends Request {
        public Sum() {
            super(TYPE, SUM);
        }

        Sum(int to) {
            super(to, TYPE, SUM);
        }

        @Override
        protected void exportPayload(MessageExporter out) {}

        @Override
        protected void importPayload(MessageImporter in) {}
    }

    /** The answer to {@link Sum}. */
    public static final class SumReply extends Response {
        long count;
        long sum;

        public SumReply() {
            super(TYPE, SUM_REPLY);
        }

        SumReply(Sum request, long count, long sum) {
            super(request, TYPE, SUM_REPLY);
            this.count = count;
            this.sum = sum;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeLong(count);
            out.writeLong(sum);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            count = in.readLong();
            sum = in.readLong();
        }
    }
}
