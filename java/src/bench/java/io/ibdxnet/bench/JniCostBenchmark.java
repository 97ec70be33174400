package io.ibdxnet.bench;

import io.ibdxnet.ib.EngineCallbacks;
import io.ibdxnet.memory.Memory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * The JNI cost table (paper §5, Figure 2): Java→native calls, native→Java
 * up-calls from a native thread (raw JNI attached once, plus an exception
 * check after each, through the jni crate, attached per call; the engine's own
 * send and receive up-calls next to the raw calls of the same methods), and
 * three ways to access a 64-byte native struct.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(3)
public class JniCostBenchmark {
    static final int UPCALLS = 100_000;
    static final int STRUCT = 64;

    long struct;
    ByteBuffer structBuffer;
    ByteBuffer direct;
    byte[] array = new byte[STRUCT];
    long sink;

    /**
     * Up-call target: {@code callback} for modes 0 to 3, and the engine's two
     * per-iteration callbacks (as cheap as Java can make them) for modes 4 to 7.
     */
    public final class Target implements EngineCallbacks {
        public void callback(long v) {
            sink += v;
        }

        @Override
        public int nextDataToSend(long prev, long completed, long next) {
            sink += next;
            return OK;
        }

        @Override
        public int received(long ring) {
            sink += ring;
            return EngineCallbacks.consumed(0);
        }

        @Override
        public void nodeEvent(int kind, int nodeId, long value) {}
    }

    final Target target = new Target();

    @Setup
    public void setup() {
        structBuffer = ByteBuffer.allocateDirect(STRUCT);
        struct = Memory.address(structBuffer);
        Memory.fill(struct, STRUCT, (byte) 1);
        direct = ByteBuffer.allocateDirect(STRUCT).order(ByteOrder.nativeOrder());
    }

    @Benchmark
    public void downcallNoArgs() {
        JniCost.noop();
    }

    @Benchmark
    public long downcallWithArgs() {
        return JniCost.withArgs(1, 2, 3);
    }

    @Benchmark
    @OperationsPerInvocation(UPCALLS)
    public long upcallAttachedOnce() {
        return JniCost.upcalls(target, UPCALLS, 0);
    }

    @Benchmark
    @OperationsPerInvocation(UPCALLS)
    public long upcallWithExceptionCheck() {
        return JniCost.upcalls(target, UPCALLS, 1);
    }

    @Benchmark
    @OperationsPerInvocation(UPCALLS)
    public long upcallThroughJniCrate() {
        return JniCost.upcalls(target, UPCALLS, 3);
    }

    /** The engine's own send-thread up-call (JniHandler::next_data_to_send). */
    @Benchmark
    @OperationsPerInvocation(UPCALLS)
    public long upcallEngineSendPath() {
        return JniCost.upcalls(target, UPCALLS, 4);
    }

    /** The engine's own receive-thread up-call (JniHandler::received). */
    @Benchmark
    @OperationsPerInvocation(UPCALLS)
    public long upcallEngineReceivePath() {
        return JniCost.upcalls(target, UPCALLS, 5);
    }

    /** The floor of the send path: the same method and arguments, raw JNI, no check. */
    @Benchmark
    @OperationsPerInvocation(UPCALLS)
    public long upcallRawSendShape() {
        return JniCost.upcalls(target, UPCALLS, 6);
    }

    /** The floor of the receive path: the same method and argument, raw JNI, no check. */
    @Benchmark
    @OperationsPerInvocation(UPCALLS)
    public long upcallRawReceiveShape() {
        return JniCost.upcalls(target, UPCALLS, 7);
    }

    @Benchmark
    @OperationsPerInvocation(1_000)
    public long upcallAttachDetachPerCall() {
        return JniCost.upcalls(target, 1_000, 2);
    }

    /**
     * Read and write a 64-byte native struct as 8 longs by address with
     * {@link Memory}: Unsafe on JDK 17–21, FFM from the jar on 22+.
     */
    @Benchmark
    public void structMemory(Blackhole bh) {
        long s = 0;
        for (int i = 0; i < STRUCT; i += 8) {
            s += Memory.getLong(struct + i);
            Memory.putLong(struct + i, s);
        }
        bh.consume(s);
    }

    /** The same through a direct ByteBuffer. */
    @Benchmark
    public void structDirectByteBuffer(Blackhole bh) {
        long s = 0;
        for (int i = 0; i < STRUCT; i += 8) {
            s += direct.getLong(i);
            direct.putLong(i, s);
        }
        bh.consume(s);
    }

    /** The same by copying a byte[] across JNI into the native struct. */
    @Benchmark
    public void structByteArrayCopiedAcrossJni(Blackhole bh) {
        long s = 0;
        for (int i = 0; i < STRUCT; i++) {
            array[i] = (byte) (array[i] + 1);
            s += array[i];
        }
        JniCost.copyIn(array, struct);
        bh.consume(s);
    }
}
