package io.ibdxnet;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.fail;

import io.ibdxnet.memory.Memory;
import io.ibdxnet.memory.NativeBlocks;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** A payload that lies about its own lengths fails its import; nothing is read past its end. */
public class MessageImporterTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    /** {@code length} bytes of native memory starting with the big-endian int {@code first}. */
    private static long nativePayload(int first, int length) {
        long mem = NativeBlocks.allocate(length);
        Memory.fill(mem, length, (byte) 0);
        for (int i = 0; i < 4; i++) {
            Memory.putByte(mem + i, (byte) (first >>> (24 - 8 * i)));
        }
        return mem;
    }

    @Test
    public void lengthsNearTwoToTheThirtyOneAreRefusedWithoutReading() {
        // pos + n overflowed int before: 4 + 0x7FFFFFFD wrapped negative and passed the check.
        for (int lie : new int[] {0x7FFFFFFF, 0x7FFFFFFD, 0x7FFFFFFC, Integer.MIN_VALUE, -1, 5}) {
            long mem = nativePayload(lie, 8);
            try {
                MessageImporter in = new MessageImporter(null, mem, 8);
                try {
                    in.readByteArray();
                    fail("a byte array of " + lie + " bytes read from 4");
                } catch (IllegalStateException expected) {
                    assertEquals(4, in.remaining()); // the length was read, nothing after it
                }
                in = new MessageImporter(null, mem, 8);
                try {
                    in.readString();
                    fail("a string of " + lie + " bytes read from 4");
                } catch (IllegalStateException expected) {
                    // refused
                }
                in = new MessageImporter(null, mem, 8);
                try {
                    in.readLongArray();
                    fail("a long array of " + lie + " elements read from 4");
                } catch (IllegalStateException expected) {
                    // refused
                }
            } finally {
                NativeBlocks.free(mem);
            }
        }
    }
}
