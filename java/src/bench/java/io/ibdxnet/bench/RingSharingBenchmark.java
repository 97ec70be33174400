package io.ibdxnet.bench;

import io.ibdxnet.core.Frame;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.transport.OutgoingRingBuffer;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One {@link OutgoingRingBuffer} shared by a producer thread (reserve, write a
 * 64-byte record, publish) and a consumer thread (the send thread's
 * readyToPost, posted, confirmed), at the same time: what the layout of the
 * ring's fields costs when the two threads write next to each other (false
 * sharing between the producers' CAS counter and the send thread's
 * pointers). The producer gives up a reservation after 1 ms (the consumer
 * stops first at the end of an iteration).
 */
@State(Scope.Group)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class RingSharingBenchmark {
    static final int RECORD = 64;
    static final int RING = 1 << 16;

    ByteBuffer ringMemory;
    OutgoingRingBuffer orb;
    final byte[] header = new byte[Frame.HEADER];
    final byte[] payload = new byte[RECORD - Frame.HEADER];

    @Setup
    public void setup() {
        ringMemory = ByteBuffer.allocateDirect(RING);
        orb = new OutgoingRingBuffer(Memory.address(ringMemory), RING);
    }

    /** A sender: one record (0 if the ring stayed full for 1 ms). */
    @Benchmark
    @Group("ring")
    @GroupThreads(1)
    public long producer() throws InterruptedException {
        long pos;
        try {
            pos = orb.reserve(RECORD, System.nanoTime() + 1_000_000);
        } catch (TimeoutException e) {
            return 0;
        }
        orb.write(pos + 4, header, 4, Frame.HEADER - 4);
        orb.write(pos + Frame.HEADER, payload, 0, payload.length);
        orb.publish(pos, RECORD);
        return pos;
    }

    /** The send thread: what is published is posted and confirmed at once. */
    @Benchmark
    @Group("ring")
    @GroupThreads(1)
    public long consumer() {
        long ready = orb.readyToPost();
        if (ready > 0) {
            orb.posted(ready);
            orb.confirmed(ready);
        }
        return ready;
    }
}
