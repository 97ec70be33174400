package io.ibdxnet.app.cluster;

import java.nio.ByteBuffer;
import java.util.SplittableRandom;
import java.util.zip.CRC32;

/**
 * The bytes a {@link HistoryNode} sends: a header naming the message, then a
 * body derived only from that name, then the body's CRC32. The receiver
 * regenerates the body from the header alone, so it can tell a corrupted
 * message (body or checksum changed on the way) from an intact one without
 * the sender's history, and the checker can still compare lengths and
 * checksums with what the sender recorded.
 *
 * <pre>
 * int magic | int sender | long senderIncarnation | int dest | long seq | body ... | int crc32(body)
 * </pre>
 */
public final class Payload {
    /** Marks our messages ("HIST"): a message without it is counted corrupted. */
    static final int MAGIC = 0x48495354;
    /** Header plus trailing checksum: the smallest payload. */
    public static final int OVERHEAD = 4 + 4 + 8 + 4 + 8 + 4;

    public final int sender;
    public final long incarnation;
    public final int dest;
    public final long seq;
    /** Whole payload length in bytes. */
    public final int length;
    /** CRC32 of the body as carried in the message. */
    public final int crc;
    /** Whether the body matches both the carried checksum and the body its header implies. */
    public final boolean intact;

    private Payload(int sender, long incarnation, int dest, long seq, int length, int crc, boolean intact) {
        this.sender = sender;
        this.incarnation = incarnation;
        this.dest = dest;
        this.seq = seq;
        this.length = length;
        this.crc = crc;
        this.intact = intact;
    }

    /** The payload of message {@code seq} from {@code sender} (incarnation {@code incarnation}) to {@code dest}. */
    public static byte[] encode(int sender, long incarnation, int dest, long seq, int size) {
        int length = Math.max(size, OVERHEAD);
        ByteBuffer b = ByteBuffer.allocate(length);
        b.putInt(MAGIC).putInt(sender).putLong(incarnation).putInt(dest).putLong(seq);
        byte[] body = body(sender, incarnation, dest, seq, length - OVERHEAD);
        b.put(body);
        b.putInt(crc(body, 0, body.length));
        return b.array();
    }

    /** CRC32 of the body of an encoded payload (what the sender records). */
    public static int bodyCrc(byte[] payload) {
        return crc(payload, OVERHEAD - 4, payload.length - OVERHEAD);
    }

    /** Reads a received payload; never throws: anything malformed is returned as not intact. */
    public static Payload decode(byte[] p) {
        if (p == null || p.length < OVERHEAD) {
            return new Payload(-1, -1, -1, -1, p == null ? 0 : p.length, 0, false);
        }
        ByteBuffer b = ByteBuffer.wrap(p);
        int magic = b.getInt();
        int sender = b.getInt();
        long incarnation = b.getLong();
        int dest = b.getInt();
        long seq = b.getLong();
        int bodyLength = p.length - OVERHEAD;
        int carried = ByteBuffer.wrap(p, p.length - 4, 4).getInt();
        int actual = crc(p, OVERHEAD - 4, bodyLength);
        boolean intact = magic == MAGIC && carried == actual
                && java.util.Arrays.equals(body(sender, incarnation, dest, seq, bodyLength),
                        java.util.Arrays.copyOfRange(p, OVERHEAD - 4, OVERHEAD - 4 + bodyLength));
        return new Payload(sender, incarnation, dest, seq, p.length, carried, intact);
    }

    /** Deterministic bytes for one message: a generator seeded by its name. */
    private static byte[] body(int sender, long incarnation, int dest, long seq, int n) {
        long seed = incarnation * 0x9E3779B97F4A7C15L ^ ((long) sender << 48) ^ ((long) dest << 32) ^ seq;
        byte[] body = new byte[n];
        new SplittableRandom(seed).nextBytes(body);
        return body;
    }

    private static int crc(byte[] a, int off, int len) {
        CRC32 c = new CRC32();
        c.update(a, off, len);
        return (int) c.getValue();
    }
}
