package io.ibdxnet.bench;

import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.MessageType;
import io.ibdxnet.Request;
import io.ibdxnet.Response;

/**
 * The messages between {@link Workload}'s first process and its child
 * processes ({@code --processes N}, {@link Processes}), beside the measured
 * data messages and requests: start a run, read a child's CPU time and peak
 * resident set, quit, and "all messages of this run arrived".
 */
final class Control {
    static final MessageType ASK = MessageType.of(2, 1);
    static final MessageType ANSWER = MessageType.of(2, 2);
    static final MessageType DONE = MessageType.of(2, 3);

    /**
     * A run: the child's node sends its share ({@link Ask#senders} threads,
     * {@link Ask#messages} each of {@link Ask#size} bytes, as the first
     * process's node does), and sends {@link Done} once its node received its
     * share of the run's data messages.
     */
    static final byte START = 1;
    /** Only answers (with the CPU time and the peak resident set). */
    static final byte CPU = 2;
    /** Answers, then the child process exits. */
    static final byte QUIT = 3;

    private Control() {}

    /** A command; every one is answered with the child's process CPU time and peak resident set. */
    public static final class Ask extends Request<Answer> {
        public byte op;
        /** START: the run's sending threads per node, messages per thread, and message size. */
        public int senders;
        public long messages;
        public int size;

        public Ask() {
            super(ASK);
        }

        Ask(int dest, byte op) {
            super(dest, ASK);
            this.op = op;
        }

        /** A START of {@code run}. */
        Ask(int dest, Results.Row run) {
            this(dest, START);
            senders = run.senders;
            messages = run.messages;
            size = run.size;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeByte(op);
            out.writeInt(senders);
            out.writeLong(messages);
            out.writeInt(size);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            op = in.readByte();
            senders = in.readInt();
            messages = in.readLong();
            size = in.readInt();
        }
    }

    /**
     * The child process's CPU time (all its threads), ns, its peak resident
     * set ({@code VmHWM}) and its committed Java heap, bytes.
     */
    public static final class Answer extends Response {
        public long cpuNanos;
        public long peakRssBytes;
        public long heapCommittedBytes;

        public Answer() {
            super(ANSWER);
        }

        Answer(Ask ask) {
            super(ask, ANSWER);
            this.cpuNanos = Results.processCpuNanos();
            this.peakRssBytes = Results.peakRssBytes();
            this.heapCommittedBytes = Results.heapCommittedBytes();
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeLong(cpuNanos);
            out.writeLong(peakRssBytes);
            out.writeLong(heapCommittedBytes);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            cpuNanos = in.readLong();
            peakRssBytes = in.readLong();
            heapCommittedBytes = in.readLong();
        }
    }

    /** Child → first process: its node received the run's last data message. */
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
