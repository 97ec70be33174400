package io.ibdxnet.bench;

import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.MessageType;
import io.ibdxnet.Request;
import io.ibdxnet.Response;

/**
 * The messages between {@link Workload}'s sender process and its receiver
 * process ({@code --processes 2}), beside the measured data messages and
 * requests: start a run, read the receiver's CPU time, quit, and "all
 * messages of this run arrived".
 */
final class Control {
    static final MessageType ASK = MessageType.of(2, 1);
    static final MessageType ANSWER = MessageType.of(2, 2);
    static final MessageType DONE = MessageType.of(2, 3);

    /** Resets the receiver's count; {@link Done} follows once {@code value} data messages arrived. */
    static final byte START = 1;
    /** Only answers (with the CPU time). */
    static final byte CPU = 2;
    /** Answers, then the receiver process exits. */
    static final byte QUIT = 3;

    private Control() {}

    /** A command; every one is answered with the receiver's process CPU time. */
    public static final class Ask extends Request<Answer> {
        public byte op;
        public long value;

        public Ask() {
            super(ASK);
        }

        Ask(int dest, byte op, long value) {
            super(dest, ASK);
            this.op = op;
            this.value = value;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeByte(op);
            out.writeLong(value);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            op = in.readByte();
            value = in.readLong();
        }
    }

    /** The receiver process's CPU time (all its threads), ns. */
    public static final class Answer extends Response {
        public long cpuNanos;

        public Answer() {
            super(ANSWER);
        }

        Answer(Ask ask, long cpuNanos) {
            super(ask, ANSWER);
            this.cpuNanos = cpuNanos;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeLong(cpuNanos);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            cpuNanos = in.readLong();
        }
    }

    /** Receiver → sender: the run's last data message arrived. */
    public static final class Done extends Message {
        public Done() {
            super(DONE);
        }

        Done(int dest) {
            super(dest, DONE);
        }

        @Override
        protected void exportPayload(MessageExporter out) {}

        @Override
        protected void importPayload(MessageImporter in) {}
    }
}
