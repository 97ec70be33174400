package io.ibdxnet.bench;

import io.ibdxnet.core.Frame;
import io.ibdxnet.transport.OutgoingRingBuffer;
import io.ibdxnet.core.ProtocolViolation;
import io.ibdxnet.core.ReceiveLimits;
import io.ibdxnet.core.StreamAssembler;
import io.ibdxnet.ib.CompletedWorkList;
import io.ibdxnet.ib.IncomingRing;
import io.ibdxnet.ib.NativeLayout;
import io.ibdxnet.ib.NextWorkPackage;
import io.ibdxnet.memory.Memory;
import java.nio.ByteBuffer;
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
 * The memory layer's hot paths, with whichever {@link Memory} this JVM uses:
 * run once with the class directories (Unsafe) and once with the
 * multi-release jar (FFM) on the same JDK ({@code ./ibdxnet bench memory}).
 * The shared structs are the real flyweights over memory laid out as the
 * native layout table says; the ring is the real {@link OutgoingRingBuffer}.
 * {@code -Dbench.memory=unsafe|ffm} makes the run fail if the other
 * implementation was selected.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class MemoryAccessBenchmark {
    static final int ENTRIES = 16;
    static final int RECORD = 64;
    static final int RING = 1 << 16;

    ByteBuffer block;
    long struct;
    long incoming;
    long completed;
    long nwpAddress;
    final NextWorkPackage nwp = new NextWorkPackage();
    final IncomingRing ring = new IncomingRing();
    final CompletedWorkList done = new CompletedWorkList();
    ByteBuffer ringMemory;
    OutgoingRingBuffer orb;
    final byte[] header = new byte[Frame.HEADER];
    final byte[] payload = new byte[RECORD - Frame.HEADER];
    ByteBuffer streamMemory;
    long stream;
    int streamLength;
    final byte[] copyOut = new byte[RECORD];

    @Setup
    public void setup() {
        String expected = System.getProperty("bench.memory");
        if (expected != null && !expected.equals(Memory.implementation())) {
            throw new IllegalStateException("bench.memory=" + expected + " but Memory is " + Memory.implementation());
        }
        block = ByteBuffer.allocateDirect(1 << 16);
        long base = Memory.address(block);
        struct = base;
        nwpAddress = base + 64;
        // An incoming ring with ENTRIES valid entries from front 3 (wraps at 32).
        NativeLayout.Struct inHeader = NativeLayout.of("IbdxnetIncomingRingHeader");
        incoming = base + 256;
        Memory.putInt(incoming + inHeader.offset("used", 4), ENTRIES);
        Memory.putInt(incoming + inHeader.offset("front", 4), 3);
        Memory.putInt(incoming + inHeader.offset("size", 4), 32);
        completed = base + 32_768;
        NativeLayout.Struct cwl = NativeLayout.of("IbdxnetCompletedWorkList");
        Memory.putInt(completed + cwl.offset("count", 4), ENTRIES);
        ringMemory = ByteBuffer.allocateDirect(RING);
        orb = new OutgoingRingBuffer(Memory.address(ringMemory), RING);
        Frame.writeHeader(header, RECORD, 1, (byte) 1, (byte) 1, Frame.FIRST | Frame.LAST, 0, RECORD - Frame.HEADER);
        // A receive buffer of ENTRIES single-frame 64-byte messages, as the assembler sees it.
        streamLength = ENTRIES * RECORD;
        streamMemory = ByteBuffer.allocateDirect(streamLength);
        stream = Memory.address(streamMemory);
        for (int i = 0; i < ENTRIES; i++) {
            Memory.copy(header, 0, stream + (long) i * RECORD, Frame.HEADER);
            Memory.copy(payload, 0, stream + (long) i * RECORD + Frame.HEADER, payload.length);
        }
    }

    /** 8 × get+put long on a 64-byte struct (the JniCost figure's struct row). */
    @Benchmark
    public void structGetPutLong(Blackhole bh) {
        long s = 0;
        for (int i = 0; i < 64; i += 8) {
            s += Memory.getLong(struct + i);
            Memory.putLong(struct + i, s);
        }
        bh.consume(s);
    }

    /** The send thread's answer to nextDataToSend: one NextWorkPackage written (6 fields). */
    @Benchmark
    public void nextWorkPackageSet() {
        nwp.wrap(nwpAddress).set(7, 1, 4096, 65_536, 42);
    }

    /** The receive up-call: every field of each incoming ring entry read. */
    @Benchmark
    @OperationsPerInvocation(ENTRIES)
    public void incomingRingEntryRead(Blackhole bh) {
        IncomingRing r = ring.wrap(incoming);
        int n = r.used();
        for (int i = 0; i < n; i++) {
            bh.consume(r.sourceNodeId(i) + r.fcData(i) + r.dataLength(i) + r.bufferId(i) + r.connection(i) + r.dataAddress(i));
        }
    }

    /** The completion up-call: every field of each completed-work entry read. */
    @Benchmark
    @OperationsPerInvocation(ENTRIES)
    public void completedWorkRead(Blackhole bh) {
        CompletedWorkList c = done.wrap(completed);
        int n = c.count();
        for (int i = 0; i < n; i++) {
            bh.consume(c.nodeId(i) + c.fcData(i) + c.bytes(i) + c.connection(i));
        }
    }

    /**
     * One 64-byte record through the ring on one thread: reserve, write header
     * and payload (array → native copies), publish (volatile store), then the
     * send thread's readyToPost (volatile load), posted, confirmed (zeroing).
     */
    @Benchmark
    public long ringRecordCycle() throws Exception {
        long pos = orb.reserve(RECORD, Long.MAX_VALUE);
        orb.write(pos + 4, header, 4, Frame.HEADER - 4);
        orb.write(pos + Frame.HEADER, payload, 0, payload.length);
        orb.publish(pos, RECORD);
        long ready = orb.readyToPost();
        orb.posted(ready);
        orb.confirmed(ready);
        return ready;
    }

    /** The receive path: 16 single-frame messages handed over in place by the stream assembler. */
    @Benchmark
    @OperationsPerInvocation(ENTRIES)
    public long streamAssemblerFeed() throws ProtocolViolation {
        assembler.feed(stream, streamLength, sink);
        return received;
    }

    final StreamAssembler assembler = new StreamAssembler(1, 0, new ReceiveLimits(1 << 20, 4 << 20, 16 << 20));
    long received;
    /** Copies each message out, as a byte[] message's import does. */
    final StreamAssembler.Sink sink = (src, type, sub, flags, req, array, at, length) -> {
        Memory.copy(at, copyOut, 0, length);
        received += copyOut[length - 1] + length;
    };
}
