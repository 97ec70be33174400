package io.ibdxnet;

import io.ibdxnet.core.Frame;
import io.ibdxnet.transport.NodeId;
import io.ibdxnet.transport.Transport;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The send path: a message serialised into a per-thread buffer, then handed
 * to the transport in frames of at most {@link Transport#maxFrameSize}. A
 * message to the own node is handed to {@link LocalDelivery} instead.
 */
final class MessageSender {
    /** Where messages to the own node go (the receive path, without a network). */
    interface LocalDelivery {
        void deliver(int source, byte type, byte subtype, int flags, int requestId, byte[] payload);
    }

    /** Per-thread serialization buffer and frame header, reused (two allocations per message less). */
    private static final class SendScratch {
        MessageExporter out = new MessageExporter(256);
        final byte[] header = new byte[Frame.HEADER];
        boolean busy;

        void release() {
            busy = false;
            if (out.array().length > 1 << 20) {
                out = new MessageExporter(256); // do not keep a huge buffer per thread
            }
        }
    }

    private static final ThreadLocal<SendScratch> SCRATCH = ThreadLocal.withInitial(SendScratch::new);

    private final DXNetConfig config;
    private final Transport transport;
    private final LocalDelivery local;
    private final AtomicInteger nextMessageId = new AtomicInteger();

    MessageSender(DXNetConfig config, Transport transport, LocalDelivery local) {
        this.config = config;
        this.transport = transport;
        this.local = local;
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
            sendFrames(m, dest, kindFlags, requestId, scratch);
        } finally {
            scratch.release();
        }
    }

    private void sendFrames(Message m, int dest, int kindFlags, int requestId, SendScratch scratch) throws NetworkException {
        MessageExporter out = scratch.out;
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
        int messageId = nextMessageId.getAndIncrement();
        int chunk = transport.maxFrameSize() - Frame.HEADER;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(config.sendTimeoutMs);
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
