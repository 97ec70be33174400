package io.ibdxnet.compat;

import de.hhu.bsinfo.dxnet.core.AbstractConnection;
import de.hhu.bsinfo.dxnet.ib.MsgrcJNIBinding;
import io.ibdxnet.core.Frame;
import io.ibdxnet.memory.Memory;
import io.ibdxnet.transport.OutgoingRingBuffer;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A minimal upstream {@code CallbackHandler}, as upstream's
 * {@code IBConnectionManager} uses the binding: reads upstream's packed structs at
 * upstream's offsets (IBConnectionManager.java's constants), writes our frame
 * format into the send ring it gets from {@code getSendBufferAddress}, and
 * parses frames out of the incoming ring, returning every buffer through
 * {@code returnRecvBuffer}. One peer node at a time (the test's).
 */
final class UpstreamPeer implements MsgrcJNIBinding.CallbackHandler {
    // PrevWorkPackageResults (12 B, packed).
    static final int PREV_NODE = 0, PREV_POSTED = 2, PREV_NOT_POSTED = 6;
    // NextWorkPackage (11 B, packed).
    static final int NEXT_BACK = 0, NEXT_FRONT = 4, NEXT_FC = 8, NEXT_NODE = 9;
    // CompletedWorkList: numNodes u16, numBytesWritten[65535] u32, fcDataWritten[65535] u8, nodeIds[] u16.
    static final int CWL_BYTES = 2, CWL_FC = 2 + 4 * 0xFFFF, CWL_IDS = CWL_FC + 0xFFFF;
    // IncomingRingBuffer: used, front, back, size; entries of 24 B from 16.
    static final int RING_ENTRIES = 16, ENTRY = 24;

    /** A received frame: its header fields and payload. */
    static final class Received {
        final int source, type, subtype, flags, requestId;
        final byte[] payload;

        Received(int source, int type, int subtype, int flags, int requestId, byte[] payload) {
            this.source = source;
            this.type = type;
            this.subtype = subtype;
            this.flags = flags;
            this.requestId = requestId;
            this.payload = payload;
        }
    }

    final BlockingQueue<String> events = new LinkedBlockingQueue<>();
    final BlockingQueue<Received> frames = new LinkedBlockingQueue<>();
    final AtomicBoolean throwInSend = new AtomicBoolean();
    final AtomicBoolean throwInReceived = new AtomicBoolean();
    /** At most this many ring entries are taken per {@code received} (upstream's full queue). */
    volatile int maxTakenPerCall = Integer.MAX_VALUE;
    /** Call {@code createConnection(source)} for each entry, as upstream's {@code getConnection} does. */
    volatile boolean connectInReceived;
    /** {@code createConnection} results other than 0 inside {@code received}. */
    final AtomicLong failedConnectsInReceived = new AtomicLong();
    final AtomicLong sendCalls = new AtomicLong();
    final AtomicLong bytesConfirmed = new AtomicLong();
    final AtomicLong buffersReturned = new AtomicLong();
    /**
     * Upstream's {@code AbstractConnectionManager.m_connections}, by name and type:
     * the library reads it before a {@code nodeDisconnected} (upstream's handler
     * throws on a null element). Set on {@link #connect}, cleared on a disconnect.
     */
    @SuppressWarnings("rawtypes")
    protected final AbstractConnection[] m_connections = new AbstractConnection[65536];

    /** A connection as upstream Java keeps one (here only its presence counts). */
    @SuppressWarnings("rawtypes")
    static final class HeldConnection extends AbstractConnection {
        HeldConnection() {
            super((short) 1);
        }

        @Override
        public void close(boolean force) {}
    }
    final List<Throwable> failures = new ArrayList<>();

    private final int ringSize;
    // Send state, guarded by this: the target, its ring, written/posted/confirmed positions (absolute).
    private int target = -1;
    private long ring;
    private long written, posted, confirmed;
    // Receive state (receive thread only).
    private final ByteArrayOutputStream stream = new ByteArrayOutputStream();

    UpstreamPeer(int ringSize) {
        this.ringSize = ringSize;
    }

    /** Java now sends to {@code node} through the ring at {@code address} (a fresh connection). */
    synchronized void connect(int node, long address) {
        m_connections[node] = new HeldConnection();
        target = node;
        ring = address;
        written = posted = confirmed = 0;
    }

    synchronized void dropConnection() {
        target = -1;
        ring = 0;
    }

    /** Writes one frame (header + payload, padded) into the ring. */
    synchronized void sendFrame(int type, int subtype, int flags, int requestId, byte[] payload) {
        if (ring == 0) {
            throw new IllegalStateException("no connection");
        }
        int length = Frame.HEADER + payload.length;
        int padded = (length + OutgoingRingBuffer.ALIGN - 1) / OutgoingRingBuffer.ALIGN * OutgoingRingBuffer.ALIGN;
        if (written + padded - confirmed > ringSize) {
            throw new IllegalStateException("ring full");
        }
        byte[] f = new byte[padded];
        byte[] h = new byte[Frame.HEADER];
        Frame.writeHeader(h, length, 0, (byte) type, (byte) subtype, flags, requestId, payload.length);
        System.arraycopy(h, 0, f, 0, h.length);
        System.arraycopy(payload, 0, f, Frame.HEADER, payload.length);
        for (int i = 0; i < padded; i++) { // byte-wise: the frame may wrap
            Memory.putByte(ring + (written + i) % ringSize, f[i]);
        }
        written += padded;
    }

    /** Payload of a byte-array message: its length (big-endian) and the bytes. */
    static byte[] byteArrayPayload(byte[] bytes) {
        byte[] p = new byte[4 + bytes.length];
        p[0] = (byte) (bytes.length >>> 24);
        p[1] = (byte) (bytes.length >>> 16);
        p[2] = (byte) (bytes.length >>> 8);
        p[3] = (byte) bytes.length;
        System.arraycopy(bytes, 0, p, 4, bytes.length);
        return p;
    }

    @Override
    public void nodeDiscovered(short nodeId) {
        events.add("discovered " + nodeId);
    }

    @Override
    public void nodeInvalidated(short nodeId) {
        events.add("invalidated " + nodeId);
    }

    @Override
    public void nodeDisconnected(short nodeId) {
        if (m_connections[nodeId & 0xFFFF] == null) { // as upstream's closeConnection would
            NullPointerException e = new NullPointerException("nodeDisconnected(" + nodeId + ") without a connection");
            synchronized (failures) {
                failures.add(e);
            }
            throw e;
        }
        m_connections[nodeId & 0xFFFF] = null;
        synchronized (this) {
            if (nodeId == target) {
                dropConnection();
            }
        }
        events.add("disconnected " + nodeId);
    }

    @Override
    public void getNextDataToSend(long next, long prev, long completionList) {
        sendCalls.incrementAndGet();
        if (throwInSend.getAndSet(false)) {
            throw new IllegalStateException("test: thrown from getNextDataToSend");
        }
        synchronized (this) {
            int node = Memory.getShort(prev + PREV_NODE);
            if (node == target && node != -1) {
                posted += Memory.getInt(prev + PREV_POSTED);
                Memory.getInt(prev + PREV_NOT_POSTED); // offered again below
            }
            int n = Memory.getShort(completionList) & 0xFFFF;
            for (int i = 0; i < n; i++) {
                int id = Memory.getShort(completionList + CWL_IDS + 2L * i) & 0xFFFF;
                int bytes = Memory.getInt(completionList + CWL_BYTES + 4L * id);
                bytesConfirmed.addAndGet(bytes);
                if (id == (target & 0xFFFF)) {
                    confirmed += bytes;
                }
            }
            Memory.putInt(next + NEXT_BACK, 0);
            Memory.putInt(next + NEXT_FRONT, 0);
            Memory.putByte(next + NEXT_FC, (byte) 0);
            Memory.putShort(next + NEXT_NODE, (short) -1);
            if (ring != 0 && posted != written) {
                Memory.putInt(next + NEXT_BACK, (int) (posted % ringSize));
                Memory.putInt(next + NEXT_FRONT, (int) (written % ringSize));
                Memory.putShort(next + NEXT_NODE, (short) target);
            }
        }
    }

    @Override
    public int received(long ringAddress) {
        if (throwInReceived.getAndSet(false)) {
            throw new IllegalStateException("test: thrown from received");
        }
        try {
            int used = Math.min(Memory.getInt(ringAddress), maxTakenPerCall);
            int front = Memory.getInt(ringAddress + 4);
            int size = Memory.getInt(ringAddress + 12);
            for (int i = 0; i < used; i++) {
                long e = ringAddress + RING_ENTRIES + (long) ENTRY * ((front + i) % size);
                int source = Memory.getShort(e) & 0xFFFF;
                if (connectInReceived && MsgrcJNIBinding.createConnection((short) source) != 0) {
                    failedConnectsInReceived.incrementAndGet();
                }
                int length = Memory.getInt(e + 4);
                long handle = Memory.getLong(e + 8);
                long data = Memory.getLong(e + 16);
                if (length > 0) {
                    byte[] b = new byte[length];
                    Memory.copy(data, b, 0, length);
                    stream.write(b, 0, length);
                    MsgrcJNIBinding.returnRecvBuffer(handle);
                    buffersReturned.incrementAndGet();
                    parse(source);
                }
            }
            return used;
        } catch (RuntimeException e) {
            synchronized (failures) {
                failures.add(e);
            }
            return 0;
        }
    }

    /** Takes every complete frame off the stream. */
    private void parse(int source) {
        byte[] s = stream.toByteArray();
        int at = 0;
        while (s.length - at >= Frame.HEADER) {
            int length = Frame.getInt(s, at);
            int padded = (length + OutgoingRingBuffer.ALIGN - 1) / OutgoingRingBuffer.ALIGN * OutgoingRingBuffer.ALIGN;
            if (s.length - at < padded) {
                break;
            }
            byte[] payload = new byte[length - Frame.HEADER];
            System.arraycopy(s, at + Frame.HEADER, payload, 0, payload.length);
            frames.add(new Received(source, s[at + 8], s[at + 9], s[at + 10], Frame.getInt(s, at + 12), payload));
            at += padded;
        }
        stream.reset();
        stream.write(s, at, s.length - at);
    }
}
