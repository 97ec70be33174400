package io.ibdxnet.core;

import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import io.ibdxnet.transport.OutgoingRingBuffer;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;

/** Frames of honest messages and a stream fed from native memory, for the budget tests. */
final class BudgetFrames {
    private BudgetFrames() {}

    /** The bytes of message {@code id}: a pattern its receiver can check. */
    static byte[] payload(int id, int total) {
        byte[] p = new byte[total];
        for (int i = 0; i < total; i++) {
            p[i] = (byte) (id * 7 + i);
        }
        return p;
    }

    /** Message {@code id} of {@code total} bytes as frames of at most {@code chunk} payload bytes, padding included. */
    static List<byte[]> frames(int id, int total, int chunk) {
        byte[] p = payload(id, total);
        List<byte[]> out = new ArrayList<>();
        int at = 0;
        do {
            int n = Math.min(chunk, total - at);
            int flags = (at == 0 ? Frame.FIRST : 0) | (at + n == total ? Frame.LAST : 0);
            byte[] f = new byte[OutgoingRingBuffer.aligned(Frame.HEADER + n)];
            Frame.writeHeader(f, Frame.HEADER + n, id, (byte) 1, (byte) 2, flags, 0, total);
            System.arraycopy(p, at, f, Frame.HEADER, n);
            out.add(f);
            at += n;
        } while (at < total);
        return out;
    }

    static byte[] concat(List<byte[]> parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] p : parts) {
            out.write(p, 0, p.length);
        }
        return out.toByteArray();
    }

    /** A stream in native memory, fed from where the assembler stopped. */
    static final class Stream implements AutoCloseable {
        final StreamAssembler assembler;
        final List<byte[]> messages = new ArrayList<>();
        private final long mem;
        final int length;
        int at;

        Stream(StreamAssembler assembler, byte[] bytes) {
            this.assembler = assembler;
            this.length = bytes.length;
            this.mem = NativeBlocks.allocate(Math.max(1, bytes.length));
            Memory.copy(bytes, 0, mem, bytes.length);
        }

        /** Feeds up to {@code n} more bytes; returns how many were consumed. */
        int feed(int n) throws ProtocolViolation {
            int done = assembler.feed(mem + at, Math.min(n, length - at), (src, t, st, fl, r, b, o, len) -> {
                messages.add(StreamAssemblerTest.copy(b, o, len));
            });
            at += done;
            return done;
        }

        int feedAll() throws ProtocolViolation {
            return feed(length - at);
        }

        boolean done() {
            return at == length && !assembler.waiting();
        }

        @Override
        public void close() {
            NativeBlocks.free(mem);
        }
    }
}
