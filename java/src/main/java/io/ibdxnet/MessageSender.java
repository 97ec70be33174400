package io.ibdxnet;

import io.ibdxnet.core.Frame;
import io.ibdxnet.core.HandlerDispatch;
import io.ibdxnet.transport.NodeId;
import io.ibdxnet.transport.RingRecord;
import io.ibdxnet.transport.Transport;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * The send path. A message of known size ({@link Message#payloadSize}) that
 * fits one frame is serialised straight into the frame reserved for it in
 * the connection's ring ({@link Transport#reserve}, {@link RingExporter}).
 * Any other is serialised into a per-thread buffer, then copied to the
 * transport in frames of at most {@link Transport#maxFrameSize}. A message to
 * the own node is handed to {@link LocalDelivery} instead.
 */
final class MessageSender {
    /** Where messages to the own node go (the receive path, without a network). */
    interface LocalDelivery {
        void deliver(int source, byte type, byte subtype, int flags, int requestId, byte[] payload);
    }

    /** Per-thread state, reused: the record and exporter of the in-place path, the buffer and header of the other. */
    private static final class SendScratch {
        final RingRecord record = new RingRecord();
        final RingExporter ring = new RingExporter();
        /** Created when a thread first sends a message of unknown size. */
        MessageExporter out;
        final byte[] header = new byte[Frame.HEADER];
        /** Made on its thread: whether that is a message handler thread (its sends wait less). */
        final boolean handlerThread = HandlerDispatch.onHandlerThread();
        boolean busy;

        MessageExporter buffer() {
            if (out == null) {
                out = new MessageExporter(256);
            }
            return out;
        }

        void release() {
            busy = false;
            if (out != null && out.array().length > 1 << 20) {
                out = null; // do not keep a huge buffer per thread
            }
        }
    }

    private static final ThreadLocal<SendScratch> SCRATCH = ThreadLocal.withInitial(SendScratch::new);

    private final DXNetConfig config;
    private final Transport transport;
    private final LocalDelivery local;
    private final AtomicInteger nextMessageId = new AtomicInteger();
    /** Largest declared payload serialised in place: one frame, within maxMessageSize. */
    private final int inPlaceMax;
    /** Messages to other nodes serialised into a buffer and copied (size unknown, or more than one frame). */
    private final LongAdder copied = new LongAdder();
    /** In-place serialisations that failed (wrong payloadSize, or the export threw): sent as skip frames. */
    private final LongAdder aborted = new LongAdder();

    MessageSender(DXNetConfig config, Transport transport, LocalDelivery local) {
        this.config = config;
        this.transport = transport;
        this.local = local;
        this.inPlaceMax = Math.min(config.maxMessageSize, transport.maxFrameSize() - Frame.HEADER);
    }

    /** {@code messages_copied} and {@code in_place_aborted} (see {@link DXNet#transportStats}). */
    void addTo(Map<String, Long> m) {
        m.put("messages_copied", copied.sum());
        m.put("in_place_aborted", aborted.sum());
    }

    /**
     * Sends {@code m} as a message ({@code kindFlags} 0), a request
     * ({@link Frame#REQUEST} with its id) or, for a {@link Response}, as the
     * answer to its request.
     */
    void send(Message m, int kindFlags, int requestId) throws NetworkException {
        int dest = m.getDestination();
        if (!NodeId.isValid(dest)) {
            throw new IllegalArgumentException("message has no valid destination (" + dest + ")");
        }
        if (m instanceof Response) {
            kindFlags = m instanceof ErrorResponse ? Frame.RESPONSE | Frame.ERROR : Frame.RESPONSE;
            requestId = ((Response) m).requestId;
        }
        m.source = config.nodeId;
        SendScratch scratch = SCRATCH.get();
        if (scratch.busy) {
            scratch = new SendScratch(); // a message exported while exporting another
        }
        scratch.busy = true;
        try {
            int size = dest == config.nodeId ? -1 : m.payloadSize();
            if (size >= 0 && size <= inPlaceMax) {
                sendInPlace(m, dest, kindFlags, requestId, size, scratch);
            } else {
                sendFrames(m, dest, kindFlags, requestId, scratch);
            }
        } finally {
            scratch.release();
        }
    }

    /**
     * When a send must have its ring space: {@code sendTimeoutMs} from now, or
     * {@code handlerSendTimeoutMs} on a handler thread (a peer whose window
     * stays full must not hold a handler for long).
     */
    private long deadline(SendScratch scratch) {
        int ms = scratch.handlerThread ? Math.min(config.sendTimeoutMs, config.handlerSendTimeoutMs) : config.sendTimeoutMs;
        return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
    }

    /**
     * One frame written where it goes. The reserved frame is published
     * whatever happens (the ring's walk would stop at it): if the message
     * wrote another size than it declared, or its export threw, as a frame
     * the receiver skips, and the send fails.
     */
    private void sendInPlace(Message m, int dest, int kindFlags, int requestId, int size, SendScratch scratch)
            throws NetworkException {
        int messageId = 0; // one frame: nothing to reassemble, so no id (and no shared counter per message)
        RingRecord record = scratch.record;
        transport.reserve(dest, Frame.HEADER + size, deadline(scratch), record);
        RingExporter out = scratch.ring;
        out.wrap(record, Frame.HEADER, size);
        boolean written = false;
        try {
            m.exportPayload(out);
            if (out.overflowed() || out.size() != size) {
                throw new IllegalStateException("message " + m.getType() + "/" + m.getSubtype() + " ("
                        + m.getClass().getName() + ") declared payloadSize() " + size + " but wrote "
                        + (out.overflowed() ? "more" : String.valueOf(out.size())) + " bytes; it was not sent");
            }
            Frame.writeHeader(record, messageId, m.getType(), m.getSubtype(), kindFlags | Frame.FIRST | Frame.LAST,
                    requestId, size);
            written = true;
        } finally {
            if (!written) {
                Frame.writeSkip(record);
                aborted.increment();
            }
            out.release();
            transport.publish(record);
        }
    }

    private void sendFrames(Message m, int dest, int kindFlags, int requestId, SendScratch scratch) throws NetworkException {
        MessageExporter out = scratch.buffer();
        out.reset();
        m.exportPayload(out);
        int total = out.size();
        if (total > config.maxMessageSize) {
            throw new IllegalArgumentException("message " + m.getType() + "/" + m.getSubtype() + " of " + total
                    + " bytes exceeds maxMessageSize (" + config.maxMessageSize + ")");
        }
        if (dest == config.nodeId) {
            byte[] copy = Arrays.copyOf(out.array(), total);
            local.deliver(config.nodeId, m.getType(), m.getSubtype(), kindFlags | Frame.FIRST | Frame.LAST, requestId, copy);
            return;
        }
        copied.increment();
        int messageId = nextMessageId.getAndIncrement();
        int chunk = transport.maxFrameSize() - Frame.HEADER;
        long deadline = deadline(scratch);
        byte[] header = scratch.header;
        int at = 0;
        do {
            int n = Math.min(chunk, total - at);
            int flags = kindFlags | (at == 0 ? Frame.FIRST : 0) | (at + n == total ? Frame.LAST : 0);
            Frame.writeHeader(header, Frame.HEADER + n, messageId, m.getType(), m.getSubtype(), flags, requestId, total);
            transport.send(dest, header, out.array(), at, n, deadline);
            at += n;
        } while (at < total);
    }
}
