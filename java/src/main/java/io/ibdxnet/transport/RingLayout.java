package io.ibdxnet.transport;

import io.ibdxnet.memory.Memory;

/**
 * The fields of {@link OutgoingRingBuffer}, laid out so that the two sides
 * of the ring do not share cache lines: the producers' CAS counter
 * {@code reserved} and the send thread's pointers each sit between 128 bytes
 * of padding (two lines: the adjacent-line prefetcher pairs them). The JVM
 * places a superclass's fields before its subclass's, hence the class chain;
 * {@code OutgoingRingBufferTest.theProducersCounterAndTheSendThreadsPointersDoNotShareACacheLine}
 * checks the offsets. Measured with {@code RingSharingBenchmark} (bench/HISTORY.md).
 */
final class RingLayout {
    private RingLayout() {}

    static final boolean BIG_ENDIAN = java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.BIG_ENDIAN;

    /** Read by every thread, written rarely (the window, closed). */
    abstract static class ColdFields {
        final long address;
        final int capacity;
        /**
         * The window's size minus one: positions map to ring indices
         * {@code position & mask}, inside the first {@code mask + 1} bytes
         * (a power of two ≤ capacity). Plain: written only while
         * {@code reserved} carries the move-on flag and only when every
         * position in use maps to the same index under the old and the new
         * value (OutgoingRingBuffer#tryGrow); the volatile store that clears
         * the flag publishes it to the next reservation.
         */
        long mask;
        volatile boolean closed;

        ColdFields(long address, int capacity) {
            this.address = address;
            this.capacity = capacity;
            this.mask = capacity - 1;
        }

        // The stores of a writer into its reserved record, by ring position
        // (OutgoingRingBuffer's, kept here: they need nothing but the ring).
        // A record being written maps alike under both masks of a change (tryGrow).
        /** Stores {@code v} at ring position {@code position}. */
        public void putByte(long position, byte v) {
            Memory.putByte(address + (position & mask), v); // safe: as in write, the caller's reservation
        }

        /** Stores {@code v} big-endian at {@code position}, wrapping around the window's end. */
        public void putShort(long position, short v) {
            long m = mask;
            long index = position & m;
            if (index <= m - 1) {
                Memory.putShort(address + index, BIG_ENDIAN ? v : Short.reverseBytes(v)); // safe: see write
            } else {
                putByte(position, (byte) (v >>> 8));
                putByte(position + 1, (byte) v);
            }
        }

        /** Stores {@code v} big-endian at {@code position}, wrapping around the window's end. */
        public void putInt(long position, int v) {
            long m = mask;
            long index = position & m;
            if (index <= m - 3) {
                Memory.putInt(address + index, bigEndian(v)); // safe: the caller's reservation (see write)
            } else {
                for (int i = 0; i < 4; i++) {
                    putByte(position + i, (byte) (v >>> (24 - 8 * i)));
                }
            }
        }

        /** Stores {@code v} big-endian at {@code position}, wrapping around the window's end. */
        public void putLong(long position, long v) {
            long m = mask;
            long index = position & m;
            if (index <= m - 7) {
                Memory.putLong(address + index, BIG_ENDIAN ? v : Long.reverseBytes(v)); // safe: see write
            } else {
                for (int i = 0; i < 8; i++) {
                    putByte(position + i, (byte) (v >>> (56 - 8 * i)));
                }
            }
        }

        static int bigEndian(int v) {
            return BIG_ENDIAN ? v : Integer.reverseBytes(v);
        }
    }

    @SuppressWarnings("unused")
    abstract static class Pad1 extends ColdFields {
        long p00, p01, p02, p03, p04, p05, p06, p07, p08, p09, p10, p11, p12, p13, p14, p15;

        Pad1(long address, int capacity) {
            super(address, capacity);
        }
    }

    /** Written by the producers (CAS through a VarHandle), read by the send thread. */
    abstract static class ProducerFields extends Pad1 {
        volatile long reserved;
        /**
         * Reservations end at or below this position: the ring's memory is
         * committed up to it (Long.MAX_VALUE: all of it, or memory committed
         * as it is touched). Read with {@code reserved}; written rarely (a
         * commit, a release).
         */
        volatile long commitLimit;

        ProducerFields(long address, int capacity) {
            super(address, capacity);
        }
    }

    @SuppressWarnings("unused")
    abstract static class Pad2 extends ProducerFields {
        long q00, q01, q02, q03, q04, q05, q06, q07, q08, q09, q10, q11, q12, q13, q14, q15;

        Pad2(long address, int capacity) {
            super(address, capacity);
        }
    }

    /** Written by the send thread; producers read {@code front} only. */
    abstract static class ConsumerFields extends Pad2 {
        volatile long front;
        long back;
        long frontPosted;
        /** Start of the record {@code frontPosted} lies in ({@code frontPosted} itself on a boundary). */
        long postRecordStart;
        /** {@code front} plus what was confirmed beyond {@code postRecordStart}, not yet freed. */
        long confirmedUpTo;

        ConsumerFields(long address, int capacity) {
            super(address, capacity);
        }
    }

    /** Keeps the next object on the heap (often a flow window the producers write) off the send thread's line. */
    @SuppressWarnings("unused")
    abstract static class Pad3 extends ConsumerFields {
        long r00, r01, r02, r03, r04, r05, r06, r07, r08, r09, r10, r11, r12, r13, r14, r15;

        Pad3(long address, int capacity) {
            super(address, capacity);
        }
    }
}
