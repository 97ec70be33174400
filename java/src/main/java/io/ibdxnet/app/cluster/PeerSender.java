package io.ibdxnet.app.cluster;

import io.ibdxnet.DXNet;
import io.ibdxnet.NetworkException;
import io.ibdxnet.app.BytesMessage;
import io.ibdxnet.app.BytesRequest;
import io.ibdxnet.app.BytesResponse;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Sends to one peer on a thread of its own, so a peer that is gone (a send
 * waiting for a connect or a full window) holds back only its own thread and
 * never the traffic to the others. Messages and requests are paced at their
 * rates; slots missed by more than 100 ms (a send that waited) are skipped,
 * not sent in a burst, and after a failed send the peer is left alone for
 * {@link #BACKOFF_MS} (skipped slots are not attempts: nothing is recorded
 * for them). After a message that failed while request slots passed, the
 * next attempt is a request: else a peer that refuses us (each send waiting
 * for the connect timeout) would only ever be sent messages. Messages go through {@code sendMessage} (blocking, in order
 * from this one thread), requests through {@code sendAsync} with the
 * deadline (never blocks; in order with the messages).
 */
final class PeerSender implements Runnable {
    static final int BACKOFF_MS = 100;

    private final DXNet net;
    private final HistoryLog log;
    private final HistoryNodeOptions o;
    private final RequestsInFlight inFlight;
    private final int dest;
    private volatile boolean stopped;
    private long messageSeq;
    private long requestSeq;

    PeerSender(DXNet net, HistoryLog log, HistoryNodeOptions o, RequestsInFlight inFlight, int dest) {
        this.net = net;
        this.log = log;
        this.o = o;
        this.inFlight = inFlight;
        this.dest = dest;
    }

    void stop() {
        stopped = true;
    }

    @Override
    public void run() {
        long start = System.nanoTime();
        long end = o.stopAtMs > 0 ? start + TimeUnit.MILLISECONDS.toNanos(o.stopAtMs - System.currentTimeMillis())
                : start + (long) (o.seconds * 1e9);
        long messages = 0;
        long requests = 0;
        long quietUntil = start;
        boolean requestOwed = false;
        while (!stopped) {
            long now = System.nanoTime();
            if (now >= end) {
                return;
            }
            long dueMessages = due(now - start, o.rate);
            long dueRequests = due(now - start, o.requestsPerSecond);
            if (now < quietUntil) { // backing off: the slots pass unused
                messages = dueMessages;
                requests = dueRequests;
            }
            messages = Math.max(messages, dueMessages - Math.max(1, o.rate / 10));
            requests = Math.max(requests, dueRequests - Math.max(1, o.requestsPerSecond / 10));
            boolean ok = true;
            if (requestOwed && now >= quietUntil) {
                requestOwed = false;
                requests++;
                ok = sendRequest();
            } else if (messages < dueMessages) {
                messages++;
                ok = sendMessage();
                // A message that waited and failed (a peer that refuses us: each send waits for
                // the connect timeout) let request slots pass: the next attempt is a request, so
                // requests are tried too rather than starved by messages that are always due first.
                requestOwed = !ok && due(System.nanoTime() - start, o.requestsPerSecond) > requests;
            } else if (requests < dueRequests) {
                requests++;
                ok = sendRequest();
            } else {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
            }
            if (!ok) {
                quietUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(BACKOFF_MS);
            }
        }
    }

    private static long due(long elapsedNanos, int perSecond) {
        return (long) (elapsedNanos / 1e9 * perSecond);
    }

    /** One message; true if the library accepted it. */
    private boolean sendMessage() {
        long seq = messageSeq++;
        byte[] p = Payload.encode(o.node, o.incarnation, dest, seq, o.size);
        long t = System.currentTimeMillis();
        try {
            net.sendMessage(new BytesMessage(dest, p));
            log.writeAt(t, "send", dest, seq, p.length, Payload.bodyCrc(p), "ok");
            return true;
        } catch (NetworkException e) {
            log.writeAt(t, "send", dest, seq, p.length, Payload.bodyCrc(p), "fail", e.reason(), e.getMessage());
            return false;
        } catch (RuntimeException e) { // not a network outcome: recorded all the same, the run goes on
            log.writeAt(t, "send", dest, seq, p.length, Payload.bodyCrc(p), "fail", "EXCEPTION", e);
            return false;
        }
    }

    /** One request, its outcome written when its future ends; false if it failed at once. */
    private boolean sendRequest() {
        long seq = requestSeq++;
        byte[] p = Payload.encode(o.node, o.incarnation, dest, seq, o.size);
        inFlight.opened(dest, seq, System.currentTimeMillis() + o.deadlineMs);
        log.write("req", dest, seq, o.deadlineMs);
        CompletableFuture<BytesResponse> f;
        try {
            f = net.sendAsync(new BytesRequest(dest, p), o.deadlineMs);
        } catch (RuntimeException e) {
            ended(seq, "failed", e);
            return false;
        }
        f.whenComplete((r, e) -> {
            if (e != null) {
                ended(seq, "failed", e instanceof CompletionException && e.getCause() != null ? e.getCause() : e);
            } else {
                ended(seq, Arrays.equals(r.bytes, p) ? "answered" : "badanswer", null);
            }
        });
        return !f.isCompletedExceptionally();
    }

    private void ended(long seq, String outcome, Throwable e) {
        if (!inFlight.ended(dest, seq)) {
            return;
        }
        if (e == null) {
            log.write("reqend", dest, seq, outcome, "-", "-");
        } else {
            String reason = e instanceof NetworkException ? ((NetworkException) e).reason().name()
                    : e.getClass().getSimpleName();
            log.write("reqend", dest, seq, outcome, reason, e.getMessage());
        }
    }
}
