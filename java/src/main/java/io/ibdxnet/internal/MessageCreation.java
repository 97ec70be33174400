package io.ibdxnet.internal;

import io.ibdxnet.FailureReason;
import io.ibdxnet.Message;
import io.ibdxnet.MessageHandler;
import io.ibdxnet.MessageImporter;
import io.ibdxnet.NetworkException;
import io.ibdxnet.NoReceiverException;
import io.ibdxnet.RemoteHandlerException;
import io.ibdxnet.Request;
import io.ibdxnet.Response;
import io.ibdxnet.core.Frame;
import io.ibdxnet.core.RateLimitedLog;
import java.lang.reflect.Constructor;
import java.util.logging.Level;

/**
 * The receive path's messages made from their frames: each created as its
 * registered class and queued for its receiver; a response completes its
 * request, an error response fails it; a request nobody here handles is
 * refused at once; what cannot be created is dropped (a plain message's
 * source is told). Split out of {@link IncomingPath}, whose batches it fills
 * and whose refusal it sends (its class name is what the requester reads).
 */
final class MessageCreation {
    private static final ApiAccess API = ApiAccess.get();

    private final int nodeId;
    private final MessageTypes types;
    private final PendingRequests requests;
    private final CoreCounters counters;
    private final RateLimitedLog warnings;
    private final ErrorReplier replier;
    private final IncomingPath.Losses losses;
    private final IncomingPath path;

    MessageCreation(int nodeId, MessageTypes types, PendingRequests requests, CoreCounters counters,
            RateLimitedLog warnings, ErrorReplier replier, IncomingPath.Losses losses, IncomingPath path) {
        this.nodeId = nodeId;
        this.types = types;
        this.requests = requests;
        this.counters = counters;
        this.warnings = warnings;
        this.replier = replier;
        this.losses = losses;
        this.path = path;
    }

    /** Creates the message and queues it for its receiver: into {@code into}, or as its own task. */
    void deliver(int source, byte type, byte subtype, int flags, int requestId, MessageImporter payload,
            HandlerBatches.Batch into) {
        int size = payload.remaining();
        if ((flags & Frame.ERROR) != 0) {
            failRequest(source, requestId, payload);
            return;
        }
        Constructor<? extends Message> ctor = types.constructor(type, subtype);
        if (ctor == null && (flags & Frame.RESPONSE) != 0) {
            ctor = learnResponseType(source, requestId, type, subtype);
            if (ctor == null) {
                return; // its request failed at once (or nobody waits for it any more)
            }
        }
        if (ctor == null) {
            counters.dropped.incrementAndGet();
            // A receiver without its class is the usual slip with the untyped register: say so.
            String hint = types.handler(type, subtype) != null
                    ? " (a receiver is registered for it, but no class: registerMessageType(" + type + ", " + subtype
                            + ", <class>) or the typed register(Class, handler))"
                    : "";
            warnings.warn("unregistered type", source, "node " + nodeId + ": message of unregistered type " + type + "/"
                    + subtype + " from " + source + " dropped" + hint);
            if ((flags & Frame.REQUEST) != 0) {
                refuse(new RefusedRequest(source, type, subtype, requestId), "type " + type + "/" + subtype
                        + " is not registered at node " + nodeId, size, into);
            } else {
                losses.dropped(source, hint.isEmpty() ? "type " + type + "/" + subtype + " not registered"
                        : "a receiver but no class registered for type " + type + "/" + subtype, size);
            }
            return;
        }
        Message m;
        try {
            m = ctor.newInstance();
            API.setSource(m, source);
            m.setDestination(nodeId);
            API.importPayload(m, payload);
        } catch (Throwable e) { // a lying payload (or a failing import) drops this message only
            counters.dropped.incrementAndGet();
            warnings.caused(Level.WARNING, "cannot create message", source, "node " + nodeId + ": cannot create message "
                    + type + "/" + subtype + " from " + source, e);
            if ((flags & Frame.REQUEST) != 0) {
                // Its requester learns it at once (a RemoteHandlerException naming the cause), not at its timeout.
                RuntimeException why = new IllegalArgumentException("cannot create request " + type + "/" + subtype
                        + " at node " + nodeId + " from its payload: " + e, null);
                path.queue(source, r -> replier.answerWithError((Request<?>) r, why),
                        new RefusedRequest(source, type, subtype, requestId), size, into);
            } else if ((flags & Frame.RESPONSE) == 0) {
                losses.dropped(source, "cannot create a message of type " + type + "/" + subtype + " from its payload ("
                        + e.getClass().getSimpleName() + ")", size);
            }
            return;
        }
        if ((flags & Frame.RESPONSE) != 0 && m instanceof Response) {
            API.setRequestId((Response) m, requestId);
            complete(source, requestId, (Response) m);
            return;
        }
        if (m instanceof Request) {
            API.setRequestId((Request<?>) m, requestId);
        }
        MessageHandler<Message> r = types.handler(type, subtype);
        if (r == null) {
            counters.dropped.incrementAndGet();
            warnings.warn("no receiver", source, "node " + nodeId + ": no receiver for " + type + "/" + subtype
                    + " (from node " + source + ")");
            if (m instanceof Request) {
                refuse((Request<?>) m, "no receiver for type " + type + "/" + subtype + " at node " + nodeId, size,
                        into);
            } else if ((flags & (Frame.REQUEST | Frame.RESPONSE)) == 0) {
                losses.dropped(source, "no receiver for type " + type + "/" + subtype, size);
            }
            return;
        }
        path.queue(source, r, m, size, into);
    }

    /**
     * Answers {@code request}, which nobody here handles, with a
     * {@link NoReceiverException} at once (its requester would otherwise wait
     * for its timeout) — from a handler task in its source's share, like a
     * reply: the coordinator never waits for a send.
     */
    private void refuse(Request<?> request, String why, int size, HandlerBatches.Batch into) {
        path.queue(request.getSource(), m -> replier.answerWithError((Request<?>) m, new IncomingPath.NoReceiver(why)),
                request, size, into);
    }

    /**
     * An error response: the remote handler of request {@code requestId}
     * threw; or, with request id 0, a {@link DropNotice}.
     */
    private void failRequest(int source, int requestId, MessageImporter payload) {
        String cls;
        String msg;
        long messages = 0;
        long bytes = 0;
        boolean notice;
        try {
            cls = payload.readString();
            msg = payload.readString();
            notice = requestId == 0 && DropNotice.MARKER.equals(cls);
            if (notice) {
                messages = payload.readLong();
                bytes = payload.readLong();
            }
        } catch (RuntimeException e) {
            counters.dropped.incrementAndGet();
            return;
        }
        if (notice) {
            losses.reported(source, messages, bytes, msg.length() <= DropNotice.MAX_CAUSES_CHARS ? msg
                    : msg.substring(0, DropNotice.MAX_CAUSES_CHARS) + "…");
            return;
        }
        PendingRequests.Pending p = requests.answerable(source, requestId);
        if (p != null) {
            p.future.completeExceptionally(IncomingPath.NO_RECEIVER.equals(cls) ? new NoReceiverException(source, msg)
                    : new RemoteHandlerException(source, cls, msg.isEmpty() ? null : msg));
        }
    }

    /**
     * A response of a type not registered here: the class its request
     * declared ({@code Request<R>}) is registered for it when that is the
     * class of this type, so nobody has to register response classes by hand.
     * Otherwise its request fails at once, naming the type (null returned).
     */
    private Constructor<? extends Message> learnResponseType(int source, int requestId, byte type, byte subtype) {
        PendingRequests.Pending p = requests.peek(source, requestId);
        if (p == null) {
            counters.dropped.incrementAndGet(); // late, or never asked for
            return null;
        }
        String problem;
        if (p.expected != Response.class && Response.class.isAssignableFrom(p.expected)) {
            @SuppressWarnings("unchecked")
            Class<? extends Message> r = (Class<? extends Message>) p.expected;
            try {
                Message probe = MessageTypes.probe(r);
                if (probe.getType() == type && probe.getSubtype() == subtype) {
                    types.define(type, subtype, r);
                    return types.constructor(type, subtype);
                }
                problem = "is not the type " + probe.getType() + "/" + probe.getSubtype() + " of " + r.getName()
                        + ", the response class the request declares";
            } catch (IllegalArgumentException e) {
                problem = "cannot be read: " + e.getMessage();
            }
        } else {
            problem = "is not registered here and the request does not declare its response class";
        }
        counters.dropped.incrementAndGet();
        p = requests.answerable(source, requestId);
        if (p != null) {
            p.future.completeExceptionally(new NetworkException(FailureReason.BAD_RESPONSE, "node " + source + " answered request " + requestId
                    + " with a response of type " + type + "/" + subtype + ", which " + problem));
        }
        return null;
    }

    /** A response: completes its request if it is of the class the request declared. */
    private void complete(int source, int requestId, Response m) {
        PendingRequests.Pending p = requests.answerable(source, requestId);
        if (p != null && p.expected.isInstance(m)) {
            p.future.complete(m);
        } else if (p != null) {
            p.future.completeExceptionally(new NetworkException(FailureReason.BAD_RESPONSE, "node " + source + " answered request " + requestId
                    + " with a " + m.getClass().getName() + ", not the " + p.expected.getName() + " the request declares"));
        }
    }
}
