package io.ibdxnet.internal;

import io.ibdxnet.DXNetConfig;
import io.ibdxnet.Message;
import io.ibdxnet.MessageExporter;
import io.ibdxnet.FailureReason;
import io.ibdxnet.NetworkException;
import io.ibdxnet.Response;
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
 * the connection's ring ({@link Transport#reserve}, the ring exporter ({@link ApiAccess#newRingExporter})).
 * Any other is serialised into a per-thread buffer, then copied to the
 * transport in frames of at most {@link Transport#maxFrameSize}. A message to
 * the own node is handed to {@link LocalDelivery} instead.
 */
public final class MessageSender {
    private static final ApiAccess API = ApiAccess.get();

    /** Where messages to the own node go (the receive path, without a network). */
    public interface LocalDelivery {
        void deliver(int source, byte type, byte subtype, int flags, int requestId, byte[] payload);
    }

    /** Per-thread state, reused: the record and exporter of the in-place path, the buffer and header of the other. */
    private static final class SendScratch {
        final RingRecord record = new RingRecord();
        final MessageExporter ring = API.newRingExporter();
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
            if (out != null && API.array(out).length > 1 << 20) {
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

    public MessageSender(DXNetConfig config, Transport transport, LocalDelivery local) {
        this.config = config;
        this.transport = transport;
        this.local = local;
        this.inPlaceMax = Math.min(config.maxMessageSize, transport.maxFrameSize() - Frame.HEADER);
    }

    /** {@code messages_copied} and {@code in_place_aborted} (see {@link StatsKeys#CORE}). */
    public void addTo(Map<String, Long> m) {
        m.put("messages_copied", copied.sum());
        m.put("in_place_aborted", aborted.sum());
    }

    /**
     * When a send must have its connection and ring space: {@code sendTimeoutMs}
     * from now, or {@code handlerSendTimeoutMs} on a handler thread (a peer
     * whose window stays full must not hold a handler for long), and never
     * later than {@code callerDeadline} (a request's own deadline).
     */
    public long sendDeadline(long now, long callerDeadline) {
        int ms = SCRATCH.get().handlerThread || HandlerDispatch.onReceivingThread() ? Math.min(config.sendTimeoutMs, config.handlerSendTimeoutMs)
                : config.sendTimeoutMs;
        long bySend = now + TimeUnit.MILLISECONDS.toNanos(ms);
        return callerDeadline - bySend < 0 ? callerDeadline : bySend;
    }

    /** {@link #sendDeadline(long, long)} bounded by the send timeouts alone. */
    public long sendDeadline() {
        long now = System.nanoTime();
        return sendDeadline(now, now + Long.MAX_VALUE / 2);
    }

    /**
     * Sends {@code m} as a message ({@code kindFlags} 0), a request
     * ({@link Frame#REQUEST} with its id) or, for a {@link Response}, as the
     * answer to its request; waits for the connection, ring and window until
     * {@code deadlineNanos}.
     */
    public void send(Message m, int kindFlags, int requestId) throws NetworkException {
        send(m, kindFlags, requestId, sendDeadline());
    }

    /** {@link #send(Message, int, int)} waiting until {@code deadlineNanos} at most. */
    public void send(Message m, int kindFlags, int requestId, long deadlineNanos) throws NetworkException {
        attempt(m, kindFlags, requestId, deadlineNanos, WAIT);
    }

    /**
     * Sends {@code m} like {@link #send} if that needs no waiting (connection
     * up, room in ring and window) and returns null; else returns it
     * serialised (minus frames already sent) for {@link #sendDeferred}.
     */
    public DeferredMessage trySend(Message m, int kindFlags, int requestId) throws NetworkException {
        return attempt(m, kindFlags, requestId, 0, TRY);
    }

    /**
     * Sends {@code m} (a message, or a response to its request) in place if
     * it goes out with no wait at all — connection up, room in ring and
     * window — and returns true; else false with nothing sent, and the caller
     * takes {@link #send} with its deadline. So a send that needs no wait
     * needs no deadline, and no clock read: one costs about a tenth of a
     * 64-byte message's CPU here.
     */
    public boolean sendNow(Message m) throws NetworkException {
        return attempt(m, 0, 0, 0, NOW) == null;
    }

    /** {@code m} serialised for {@link #sendDeferred} without trying to send it (something is deferred ahead of it). */
    public DeferredMessage serialise(Message m, int kindFlags, int requestId) throws NetworkException {
        return attempt(m, kindFlags, requestId, 0, DEFER);
    }

    /**
     * How {@link #attempt} sends: waiting, only if no wait is needed, or not at
     * all (a message to the own node is always delivered); or {@code NOW}: in
     * place if no wait is needed, else nothing at all ({@link #NOT_NOW}).
     */
    private static final int WAIT = 0, TRY = 1, DEFER = 2, NOW = 3;
    /** {@link #attempt}'s answer in mode {@code NOW} when nothing was sent (never leaves this class). */
    private static final DeferredMessage NOT_NOW = new DeferredMessage(0, (byte) 0, (byte) 0, 0, 0, 0, new byte[0], 0);

    private DeferredMessage attempt(Message m, int kindFlags, int requestId, long deadline, int mode)
            throws NetworkException {
        int dest = m.getDestination();
        if (!NodeId.isValid(dest)) {
            throw new IllegalArgumentException("message has no valid destination (" + dest + ")");
        }
        if (m instanceof Response) {
            kindFlags = m instanceof ErrorResponse ? Frame.RESPONSE | Frame.ERROR : Frame.RESPONSE;
            requestId = API.requestId((Response) m);
        }
        API.setSource(m, config.nodeId);
        SendScratch scratch = SCRATCH.get();
        if (scratch.busy) {
            scratch = new SendScratch(); // a message exported while exporting another
        }
        scratch.busy = true;
        try {
            int size = dest == config.nodeId ? -1 : API.payloadSize(m);
            if (size >= 0 && size <= inPlaceMax) {
                RingRecord record = scratch.record;
                if (mode == WAIT) {
                    transport.reserve(dest, Frame.HEADER + size, deadline, record);
                } else if (mode == NOW) {
                    if (!transport.tryReserve(dest, Frame.HEADER + size, record)) {
                        return NOT_NOW;
                    }
                } else if (mode == DEFER || !transport.tryReserve(dest, Frame.HEADER + size, record)) {
                    return serialised(m, dest, kindFlags, requestId, size, scratch);
                }
                writeInPlace(m, kindFlags, requestId, size, scratch);
                return null;
            }
            if (mode == NOW) {
                return NOT_NOW; // frames, or the own node: the usual path
            }
            return sendFrames(m, dest, kindFlags, requestId, scratch, deadline, mode);
        } finally {
            scratch.release();
        }
    }

    /** A message of declared size that could not be written in place now, serialised for later. */
    private DeferredMessage serialised(Message m, int dest, int kindFlags, int requestId, int size, SendScratch scratch) {
        MessageExporter out = scratch.buffer();
        API.reset(out);
        API.exportPayload(m, out);
        if (API.size(out) != size) {
            throw new IllegalStateException("message " + m.getType() + "/" + m.getSubtype() + " ("
                    + m.getClass().getName() + ") declared payloadSize() " + size + " but wrote " + API.size(out)
                    + " bytes; it was not sent");
        }
        copied.increment();
        return new DeferredMessage(dest, m.getType(), m.getSubtype(), kindFlags, requestId,
                nextMessageId.getAndIncrement(), Arrays.copyOf(API.array(out), size), 0);
    }

    /** Sends what {@link #trySend} deferred (the frames not yet sent), waiting until its {@code sendBy}. */
    public void sendDeferred(DeferredMessage d) throws NetworkException {
        byte[] header = new byte[Frame.HEADER];
        int total = d.payload.length;
        int chunk = transport.maxFrameSize() - Frame.HEADER;
        int at = d.sentInline;
        do {
            int n = Math.min(chunk, total - at);
            int flags = d.kindFlags | (at == 0 ? Frame.FIRST : 0) | (at + n == total ? Frame.LAST : 0);
            Frame.writeHeader(header, Frame.HEADER + n, d.messageId, d.type, d.subtype, flags, d.requestId, total);
            transport.send(d.dest, header, d.payload, at, n, d.sendBy);
            at += n;
        } while (at < total);
    }

    /**
     * One frame written where it goes. The reserved frame is published
     * whatever happens (the ring's walk would stop at it): if the message
     * wrote another size than it declared, or its export threw, as a frame
     * the receiver skips, and the send fails.
     */
    private void writeInPlace(Message m, int kindFlags, int requestId, int size, SendScratch scratch) {
        int messageId = 0; // one frame: nothing to reassemble, so no id (and no shared counter per message)
        RingRecord record = scratch.record;
        MessageExporter out = scratch.ring;
        API.wrap(out, record, Frame.HEADER, size);
        boolean written = false;
        try {
            API.exportPayload(m, out);
            if (API.overflowed(out) || API.size(out) != size) {
                throw new IllegalStateException("message " + m.getType() + "/" + m.getSubtype() + " ("
                        + m.getClass().getName() + ") declared payloadSize() " + size + " but wrote "
                        + (API.overflowed(out) ? "more" : String.valueOf(API.size(out))) + " bytes; it was not sent");
            }
            Frame.writeHeader(record, messageId, m.getType(), m.getSubtype(), kindFlags | Frame.FIRST | Frame.LAST,
                    requestId, size);
            written = true;
        } finally {
            if (!written) {
                Frame.writeSkip(record);
                aborted.increment();
            }
            API.release(out);
            if ((kindFlags & (Frame.REQUEST | Frame.RESPONSE)) != 0) {
                transport.publishAwaited(record); // a round trip's frame: written at once where the transport can
            } else {
                transport.publish(record);
            }
        }
    }

    private DeferredMessage sendFrames(Message m, int dest, int kindFlags, int requestId, SendScratch scratch,
            long deadline, int mode) throws NetworkException {
        MessageExporter out = scratch.buffer();
        API.reset(out);
        API.exportPayload(m, out);
        int total = API.size(out);
        if (total > config.maxMessageSize) {
            throw new NetworkException(FailureReason.TOO_LARGE, "message " + m.getType() + "/" + m.getSubtype() + " of "
                    + total + " bytes exceeds maxMessageSize (" + config.maxMessageSize + ")");
        }
        if (dest == config.nodeId) {
            byte[] copy = Arrays.copyOf(API.array(out), total);
            local.deliver(config.nodeId, m.getType(), m.getSubtype(), kindFlags | Frame.FIRST | Frame.LAST, requestId, copy);
            return null;
        }
        copied.increment();
        int messageId = nextMessageId.getAndIncrement();
        int chunk = transport.maxFrameSize() - Frame.HEADER;
        byte[] header = scratch.header;
        int at = 0;
        do {
            int n = Math.min(chunk, total - at);
            int flags = kindFlags | (at == 0 ? Frame.FIRST : 0) | (at + n == total ? Frame.LAST : 0);
            Frame.writeHeader(header, Frame.HEADER + n, messageId, m.getType(), m.getSubtype(), flags, requestId, total);
            if (mode == WAIT) {
                transport.send(dest, header, API.array(out), at, n, deadline);
            } else if (mode == DEFER || !transport.trySend(dest, header, API.array(out), at, n)) {
                // The rest goes later, in order; its frames carry the same message id.
                return new DeferredMessage(dest, m.getType(), m.getSubtype(), kindFlags, requestId, messageId,
                        Arrays.copyOf(API.array(out), total), at);
            }
            at += n;
        } while (at < total);
        return null;
    }
}
