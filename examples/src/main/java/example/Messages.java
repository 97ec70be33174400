package example;

import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.MessageType;
import io.ibdxnet.Request;
import io.ibdxnet.Response;

/** The example's messages: an event carrying a value, and a request for the running count and sum. */
public final class Messages {
    static final MessageType EVENT = MessageType.of(1, 1);
    static final MessageType SUM = MessageType.of(1, 2);
    static final MessageType SUM_REPLY = MessageType.of(1, 3);

    private Messages() {}

    /** One event of the stream. */
    public static final class Event extends Message {
        long value;

        public Event() {
            super(EVENT);
        }

        Event(int to, long value) {
            super(to, EVENT);
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
    public static final class Sum extends Request<SumReply> {
        public Sum() {
            super(SUM);
        }

        Sum(int to) {
            super(to, SUM);
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
            super(SUM_REPLY);
        }

        SumReply(Sum request, long count, long sum) {
            super(request, SUM_REPLY);
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
