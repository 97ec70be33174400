package io.ibdxnet.core;

import io.ibdxnet.transport.OutgoingRingBuffer;
import java.io.ByteArrayOutputStream;
import java.util.Random;

/** Valid frame streams and hostile mutations of them (the fuzzers' input). */
public final class FrameMutator {
    private FrameMutator() {}

    /** 1–6 messages of random size and kind, the larger ones in interleaved fragments. */
    public static byte[] validStream(Random r, int maxMessage) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int n = 1 + r.nextInt(6);
        for (int m = 0; m < n; m++) {
            int total = r.nextInt(4) == 0 ? r.nextInt(Math.min(maxMessage, 3000)) : r.nextInt(64);
            int chunk = 1 + r.nextInt(Math.max(1, total));
            int kind = new int[] {0, Frame.REQUEST, Frame.RESPONSE}[r.nextInt(3)];
            byte[] payload = new byte[total];
            r.nextBytes(payload);
            int at = 0;
            byte[] h = new byte[Frame.HEADER];
            do {
                int len = Math.min(chunk, total - at);
                int flags = kind | (at == 0 ? Frame.FIRST : 0) | (at + len == total ? Frame.LAST : 0);
                Frame.writeHeader(h, Frame.HEADER + len, 1000 + m, (byte) 3, (byte) 4, flags, m, total);
                out.write(h, 0, h.length);
                out.write(payload, at, len);
                int pad = OutgoingRingBuffer.aligned(Frame.HEADER + len) - (Frame.HEADER + len);
                out.write(new byte[pad], 0, pad);
                at += len;
            } while (at < total);
        }
        return out.toByteArray();
    }

    /** One to three mutations: flipped bytes, a header field replaced by a hostile value, a cut. */
    public static byte[] mutate(Random r, byte[] s, int maxMessage) {
        int k = 1 + r.nextInt(3);
        for (int i = 0; i < k && s.length > 0; i++) {
            switch (r.nextInt(6)) {
                case 0:
                    s[r.nextInt(s.length)] ^= (byte) (1 << r.nextInt(8));
                    break;
                case 1:
                    s = java.util.Arrays.copyOf(s, r.nextInt(s.length));
                    break;
                case 2: // a length-like word anywhere
                    if (s.length >= 4) {
                        put(s, r.nextInt(s.length - 3) & ~3, hostileInt(r, maxMessage));
                    }
                    break;
                case 3: // the first frame's total
                    if (s.length >= 20) {
                        put(s, 16, hostileInt(r, maxMessage));
                    }
                    break;
                case 4: // flags
                    if (s.length >= 11) {
                        s[10] = (byte) r.nextInt(256);
                    }
                    break;
                default: // random garbage appended
                    byte[] g = new byte[r.nextInt(64)];
                    r.nextBytes(g);
                    byte[] t = java.util.Arrays.copyOf(s, s.length + g.length);
                    System.arraycopy(g, 0, t, s.length, g.length);
                    s = t;
            }
        }
        return s;
    }

    /** A value a hostile peer puts where a length or total belongs. */
    public static int hostileInt(Random r, int maxMessage) {
        int[] v = {0, 1, 3, 19, 20, 21, -1, Integer.MAX_VALUE, Integer.MIN_VALUE, maxMessage, maxMessage + 1, 0x7FFFFFFF - 3};
        return r.nextBoolean() ? v[r.nextInt(v.length)] : r.nextInt();
    }

    /** Writes {@code v} big-endian at {@code at}. */
    public static void put(byte[] b, int at, int v) {
        b[at] = (byte) (v >>> 24);
        b[at + 1] = (byte) (v >>> 16);
        b[at + 2] = (byte) (v >>> 8);
        b[at + 3] = (byte) v;
    }
}
