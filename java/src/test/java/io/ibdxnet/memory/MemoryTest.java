package io.ibdxnet.memory;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.fail;

import io.ibdxnet.TestSupport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.After;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Every {@link Memory} operation, run against whichever implementation this
 * JVM selected (Unsafe from the class directories or on JDK 17–21, FFM from
 * the multi-release jar on 22+): native byte order, unaligned plain accesses,
 * volatile ints, copies to and from arrays at an index, fill, buffer addresses.
 */
public class MemoryTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(5);

    private long mem;

    @Before
    public void allocate() {
        mem = NativeBlocks.allocate(64);
    }

    @After
    public void free() {
        NativeBlocks.free(mem);
    }

    /** The implementation the build expects here ({@code test.memoryImplementation}), else by JDK alone. */
    @Test
    public void theExpectedImplementationIsSelected() {
        String expected = System.getProperty("test.memoryImplementation");
        if (expected == null) {
            expected = Runtime.version().feature() < 22 ? "unsafe" : Memory.implementation();
        }
        assertEquals("Memory implementation on JDK " + Runtime.version(), expected, Memory.implementation());
    }

    @Test
    public void primitivesAreNativeOrderAndMayBeUnaligned() {
        for (int misalign = 0; misalign < 8; misalign++) {
            long a = mem + misalign;
            Memory.putLong(a, 0x0102030405060708L);
            assertEquals(0x0102030405060708L, Memory.getLong(a));
            ByteBuffer view = ByteBuffer.allocate(8).order(ByteOrder.nativeOrder()).putLong(0, 0x0102030405060708L);
            for (int i = 0; i < 8; i++) {
                assertEquals("byte " + i + " at misalignment " + misalign, view.get(i), Memory.getByte(a + i));
            }
            Memory.putInt(a + 8, 0xCAFEBABE);
            assertEquals(0xCAFEBABE, Memory.getInt(a + 8));
            assertEquals(ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? (byte) 0xBE : (byte) 0xCA, Memory.getByte(a + 8));
            Memory.putShort(a + 12, (short) 0xBEEF);
            assertEquals((short) 0xBEEF, Memory.getShort(a + 12));
            Memory.putByte(a + 14, (byte) -7);
            assertEquals(-7, Memory.getByte(a + 14));
        }
    }

    @Test
    public void volatileIntsAtAlignedAddresses() {
        Memory.putIntVolatile(mem + 4, 0x11223344);
        assertEquals(0x11223344, Memory.getIntVolatile(mem + 4));
        assertEquals(0x11223344, Memory.getInt(mem + 4));
    }

    @Test
    public void volatileLongsAtAlignedAddresses() {
        Memory.putLong(mem + 8, 0x1122334455667788L);
        assertEquals(0x1122334455667788L, Memory.getLongVolatile(mem + 8));
    }

    @Test
    public void copiesToAndFromArraysAtAnIndex() {
        byte[] src = new byte[20];
        for (int i = 0; i < src.length; i++) {
            src[i] = (byte) (i + 1);
        }
        Memory.fill(mem, 64, (byte) 0);
        Memory.copy(src, 5, mem + 3, 10);
        assertEquals(0, Memory.getByte(mem + 2));
        assertEquals(6, Memory.getByte(mem + 3));
        assertEquals(15, Memory.getByte(mem + 12));
        assertEquals(0, Memory.getByte(mem + 13));
        byte[] dst = new byte[16];
        Memory.copy(mem + 3, dst, 4, 10);
        byte[] want = new byte[16];
        System.arraycopy(src, 5, want, 4, 10);
        assertArrayEquals(want, dst);
        try {
            Memory.copy(mem, dst, 10, 10);
            fail("copy past the array's end must be refused");
        } catch (IndexOutOfBoundsException expected) {
            // nothing written beyond dst
        }
    }

    @Test
    public void fillSetsExactlyTheRange() {
        Memory.fill(mem, 64, (byte) 0);
        Memory.fill(mem + 10, 7, (byte) 0x5A);
        for (int i = 0; i < 64; i++) {
            assertEquals("byte " + i, i >= 10 && i < 17 ? 0x5A : 0, Memory.getByte(mem + i));
        }
    }

    @Test
    public void addressOfADirectBufferIsItsFirstByte() {
        ByteBuffer b = ByteBuffer.allocateDirect(32);
        b.put(0, (byte) 42).put(9, (byte) 43);
        long a = Memory.address(b);
        assertEquals(42, Memory.getByte(a));
        b.position(5);
        assertEquals("the position does not move the address", a, Memory.address(b));
        ByteBuffer slice = b.position(9).slice();
        assertEquals(a + 9, Memory.address(slice));
        assertEquals(43, Memory.getByte(Memory.address(slice)));
        try {
            Memory.address(ByteBuffer.allocate(8));
            fail("a heap buffer has no address");
        } catch (IllegalArgumentException expected) {
            // refused
        }
    }
}
