package io.ibdxnet;

import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.internal.MessageSender;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.transport.FlowWindow;
import io.ibdxnet.transport.IncomingBuffer;
import io.ibdxnet.transport.OutgoingRingBuffer;
import io.ibdxnet.transport.RingConnection;
import io.ibdxnet.transport.RingRecord;
import io.ibdxnet.transport.Transport;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The sender's path alone, one thread: {@link MessageSender#send} of a
 * byte-array message into a real {@link OutgoingRingBuffer}, serialised in
 * place (its size declared) or into the per-thread buffer and copied (the
 * same bytes, size not declared). The ring is drained after each message as
 * the send thread would (posted, confirmed: zeroed), the same in both.
 * In package {@code io.ibdxnet} for the package-private sender.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class SendPathBenchmark {
    @Param({"64", "4096", "65536"})
    int size;

    MessageSender sender;
    BytesMessage declared;
    Undeclared undeclared;

    /** The same payload as a {@link BytesMessage}, size not declared. */
    static final class Undeclared extends Message {
        final byte[] bytes;

        Undeclared(byte[] bytes) {
            super(1, BytesMessage.TYPE);
            this.bytes = bytes;
        }

        @Override
        protected void exportPayload(MessageExporter out) {
            out.writeByteArray(bytes);
        }

        @Override
        protected void importPayload(MessageImporter in) {
            throw new UnsupportedOperationException();
        }
    }

    /** One connection to node 1 over a direct buffer, drained at once. */
    static final class RingOnly implements Transport {
        final ByteBuffer memory = ByteBuffer.allocateDirect(1 << 20);
        final RingConnection c = new RingConnection(1, new OutgoingRingBuffer(Memory.address(memory), 1 << 20),
                new FlowWindow(Long.MAX_VALUE / 2, 1)) {};

        private void drain() {
            long ready = c.orb.readyToPost();
            c.orb.posted(ready);
            c.orb.confirmed(ready);
        }

        @Override
        public void send(int node, byte[] header, byte[] payload, int offset, int length, long deadlineNanos)
                throws NetworkException {
            c.write(header, payload, offset, length, deadlineNanos, false);
            drain();
        }

        @Override
        public void reserve(int node, int length, long deadlineNanos, RingRecord record) throws NetworkException {
            c.reserve(length, deadlineNanos, false, record);
        }

        @Override
        public void publish(RingRecord record) {
            c.publish(record);
            drain();
        }

        @Override
        public int maxFrameSize() {
            return 1 << 19;
        }

        @Override
        public boolean isConnected(int node) {
            return true;
        }

        @Override
        public void addNode(int id, String host, int port) {}

        @Override
        public int localPort() {
            return 0;
        }

        @Override
        public void consumed(IncomingBuffer buffer) {}

        @Override
        public void closeConnection(int node, int connection, String reason) {}

        @Override
        public String name() {
            return "ring-only";
        }

        @Override
        public Map<String, Long> stats() {
            return Map.of();
        }

        @Override
        public boolean awaitSent(long timeoutMs) {
            return true;
        }

        @Override
        public void close() {}
    }

    @Setup
    public void setup() {
        sender = new MessageSender(new DXNetConfig(0), new RingOnly(), (src, type, sub, flags, req, payload) -> {});
        byte[] payload = new byte[size - 4]; // with its length prefix: size bytes
        declared = new BytesMessage(1, payload);
        undeclared = new Undeclared(payload);
    }

    @Benchmark
    public void inPlace() throws NetworkException {
        sender.send(declared, 0, 0);
    }

    @Benchmark
    public void copied() throws NetworkException {
        sender.send(undeclared, 0, 0);
    }
}
