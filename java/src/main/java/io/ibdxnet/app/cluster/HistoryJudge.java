package io.ibdxnet.app.cluster;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Joins the histories of one scenario (every node, every incarnation) and
 * sorts each message and request into {@link Verdict}'s categories.
 *
 * <p>A message is named by (sender node, sender incarnation, destination,
 * sequence number); an incarnation is one process of a node (a restart is a
 * new one). A send is <b>accepted</b> when {@code sendMessage} returned.
 *
 * <ul>
 * <li><b>delivered</b>: accepted, and some incarnation of the destination
 * recorded it intact (a restarted destination counts: the application sent
 * to the node).
 * <li><b>duplicated</b>: recorded more than once (each extra record counts),
 * across the destination's incarnations; likewise a request handled twice.
 * <li><b>reordered</b>: in one receiving incarnation's file, a message from
 * one sender incarnation whose sequence number is below one already seen
 * from it (and is not a duplicate); each sender sends from one thread, so
 * its order must hold. Likewise requests handled.
 * <li><b>corrupted</b>: received with a checksum or body that does not match
 * its header, or with a length or checksum other than the sender recorded;
 * or a request whose echo came back different (another request's answer).
 * A message that arrived only corrupted is not delivered: it also counts
 * as lost.
 * <li><b>lost</b>: accepted and never recorded by the destination. A loss is
 * <b>reported</b> (covered) when the sender's own incarnation recorded
 * possible-loss events ({@code DXNet.LossListener}) naming the destination
 * at or after the send began, whose reported bytes can hold it: the lost
 * messages of one sender→destination are placed latest first into the
 * events after them, each event taking at most its reported byte count of
 * payload bytes (payload is less than what it costs on the wire, so this
 * never blames the library wrongly; an event with unknown bytes takes any
 * number). A lost message that finds no place is <b>lost-unreported</b>:
 * the library promised a possible-loss event for every accepted message
 * that is not handled, and a failed later send or a disconnect is not that
 * event. Exception: a loss sent by an incarnation that was killed (no
 * {@code end} line) within {@code crashWindowMs} before its last record is
 * <b>lost with its killed sender</b> — the messages in its ring died with it
 * and nobody is left to tell; not judged.
 * <li><b>send failed</b>: {@code sendMessage} threw; such a message must not
 * arrive — if it does it is <b>delivered though its send failed</b>.
 * <li><b>received, never sent</b>: a record naming a send its sender's
 * complete history lacks. When the sender was killed its last sends may not
 * have reached its file (buffered lines): records beyond its last recorded
 * sequence number to that destination are <b>received, send unrecorded</b>,
 * not judged (they were delivered; we cannot know more).
 * <li>Requests: <b>answered</b>, <b>failed</b> by {@code FailureReason}, or
 * <b>hung</b>: an outcome (or the node's stop with it still open) later than
 * deadline + {@code graceMs} although the requester's process ran for at
 * least {@code graceMs} after the deadline (its {@code tick} lines, one per
 * 100 ms while it runs: a requester that was itself stopped, by SIGSTOP or a
 * starved host, cannot blame the library for its own late timer; such a late
 * outcome is judged by its kind); when a killed sender ran less than
 * grace + 1 s after the deadline, its missing outcome is not judged.
 * </ul>
 * A receiver's records are written through before its handler returns, so a
 * killed receiver never looks as if it lost what it handled; what it took
 * off the wire and confirmed but had not handled when killed is lost, and
 * is reported only if its sender still counted it unconfirmed.
 */
final class HistoryJudge {
    private final List<History> histories;
    private final long crashWindowMs;
    private final long graceMs;
    private final Verdict v;

    HistoryJudge(String scenario, List<History> histories, long crashWindowMs, long graceMs, boolean refused) {
        this.histories = histories;
        this.crashWindowMs = crashWindowMs;
        this.graceMs = graceMs;
        this.v = new Verdict(scenario, refused);
    }

    private static String key(int sender, long incarnation, int dest, long seq) {
        return sender + "." + incarnation + ">" + dest + "#" + seq;
    }

    Verdict judge() {
        Map<String, List<History.Recv>> received = new HashMap<>();
        Map<String, List<History.Recv>> handled = new HashMap<>();
        for (History h : histories) {
            orderAndDuplicates(h, h.recvs, received, "message");
            orderAndDuplicates(h, h.handled, handled, "request");
        }
        Map<String, History.Send> sent = new HashMap<>();
        for (History h : histories) {
            judgeSends(h, received, sent);
            judgeRequests(h);
        }
        judgeUnmatchedReceives(received, sent);
        if (v.refused) {
            judgeRefusal();
        }
        for (History h : histories) {
            long accepted = h.sends.stream().filter(s -> s.failure == null).count();
            v.incarnation(String.format("%s: %d sent (%d failed), %d received, %d requests sent, %d handled, %d loss events",
                    h.name(), accepted, h.sends.size() - accepted, h.recvs.size(), h.requests.size(), h.handled.size(),
                    h.losses.size()));
        }
        return v;
    }

    /**
     * Records of one receiving incarnation, in file order: a name recorded
     * before (by any incarnation of the node: {@code byKey} holds them all)
     * is a duplicate; else one below the highest sequence number seen here
     * from its sender incarnation is reordered.
     */
    private void orderAndDuplicates(History h, List<History.Recv> records, Map<String, List<History.Recv>> byKey,
            String what) {
        Map<String, Long> highest = new HashMap<>();
        for (History.Recv r : records) {
            if (!r.intact) {
                v.add(Verdict.CORRUPTED, what + " from node " + r.sender + " seq " + r.seq + " at " + h.name());
                continue;
            }
            String k = key(r.sender, r.senderIncarnation, h.node, r.seq);
            List<History.Recv> l = byKey.computeIfAbsent(k, x -> new ArrayList<>());
            l.add(r);
            String pair = r.sender + "." + r.senderIncarnation;
            Long top = highest.get(pair);
            if (l.size() > 1) {
                v.add(Verdict.DUPLICATED, what + " " + k + " recorded again by " + h.name());
            } else if (top != null && r.seq < top) {
                v.add(Verdict.REORDERED, what + " " + k + " after seq " + top + " at " + h.name());
            }
            highest.put(pair, top == null ? r.seq : Math.max(top, r.seq));
        }
    }

    private void judgeSends(History h, Map<String, List<History.Recv>> received, Map<String, History.Send> sent) {
        Map<Integer, List<History.Send>> lostTo = new HashMap<>();
        for (History.Send s : h.sends) {
            String k = key(h.node, h.incarnation, s.dest, s.seq);
            sent.put(k, s);
            List<History.Recv> got = received.get(k);
            if (s.failure != null) {
                v.add(Verdict.SEND_FAILED, null);
                if (got != null) {
                    v.add(Verdict.DELIVERED_AFTER_FAILURE, k + " (send failed with " + s.failure + ")");
                }
                continue;
            }
            v.add(Verdict.SENT, null);
            if (got == null) {
                lostTo.computeIfAbsent(s.dest, d -> new ArrayList<>()).add(s);
                continue;
            }
            v.add(Verdict.DELIVERED, null);
            for (History.Recv r : got) {
                if (r.length != s.length || r.crc != s.crc) {
                    v.add(Verdict.CORRUPTED, k + " received with length " + r.length + " crc " + r.crc + ", sent "
                            + s.length + " crc " + s.crc);
                }
            }
        }
        lostTo.forEach((dest, lost) -> judgeLosses(h, dest, lost));
    }

    /** The coverage of {@link HistoryJudge}'s definition: latest loss first into the events after it. */
    private void judgeLosses(History h, int dest, List<History.Send> lost) {
        List<History.Loss> events = new ArrayList<>();
        for (History.Loss l : h.losses) {
            if (l.node == dest) {
                events.add(l);
            }
        }
        events.sort(Comparator.comparingLong((History.Loss l) -> l.time));
        lost.sort(Comparator.comparingLong((History.Send s) -> s.time).reversed());
        int next = events.size(); // events[next..] are after the current send
        long room = 0;
        boolean unbounded = false;
        for (History.Send s : lost) {
            while (next > 0 && events.get(next - 1).time >= s.time) {
                next--;
                long b = events.get(next).bytes;
                if (b < 0) {
                    unbounded = true;
                } else {
                    room += b;
                }
            }
            String k = key(h.node, h.incarnation, dest, s.seq);
            if (unbounded || room >= s.length) {
                room -= unbounded ? 0 : s.length;
                v.add(Verdict.LOST_REPORTED, null);
            } else if (!h.ended && s.time >= h.lastTime - crashWindowMs) {
                v.add(Verdict.LOST_WITH_SENDER, null);
            } else {
                v.add(Verdict.LOST_UNREPORTED, k + " sent at " + s.time + ", " + (next == events.size()
                        ? "no loss event for node " + dest + " after it"
                        : "loss events after it report too few bytes"));
            }
        }
    }

    private void judgeRequests(History h) {
        for (History.Req r : h.requests.values()) {
            v.add(Verdict.REQ_SENT, null);
            long due = r.time + r.deadlineMs + graceMs;
            String k = key(h.node, h.incarnation, r.dest, r.seq);
            if (r.outcome == null) {
                // A killed node's last outcomes may have died in its buffer: a second more to be sure.
                if (!h.ended && h.ranMs(r.time + r.deadlineMs, h.lastTime) < graceMs + 1000) {
                    v.add(Verdict.REQ_UNJUDGED, null);
                } else {
                    v.add(Verdict.REQ_HUNG, "request " + k + " sent at " + r.time + ": no outcome by " + h.lastTime);
                }
            } else if (r.endTime > due && h.ranMs(r.time + r.deadlineMs, r.endTime) >= graceMs) {
                v.add(Verdict.REQ_HUNG, "request " + k + " sent at " + r.time + " with deadline " + r.deadlineMs
                        + " ms: " + r.outcome + " at " + r.endTime);
            } else if (r.outcome.equals("answered")) {
                v.add(Verdict.REQ_ANSWERED, null);
            } else if (r.outcome.equals("badanswer")) {
                v.add(Verdict.CORRUPTED, "request " + k + " answered with other bytes than it carried");
            } else if (r.outcome.equals("pending")) {
                // Open when its node stopped, before its deadline and grace: a stop mid-run (SIGTERM).
                v.add(Verdict.REQ_UNJUDGED, null);
            } else {
                v.requestFailed(r.reason);
            }
        }
    }

    /**
     * Nodes that refuse each other (different pre-shared keys): every record
     * of data from another node is one too many, whatever its send says —
     * a message received, a request handled, an answer received.
     */
    private void judgeRefusal() {
        for (History h : histories) {
            for (History.Recv r : h.recvs) {
                v.add(Verdict.CROSSED, "message " + key(r.sender, r.senderIncarnation, h.node, r.seq) + " received by "
                        + h.name());
            }
            for (History.Recv r : h.handled) {
                v.add(Verdict.CROSSED, "request " + key(r.sender, r.senderIncarnation, h.node, r.seq) + " handled by "
                        + h.name());
            }
            for (History.Req r : h.requests.values()) {
                if ("answered".equals(r.outcome) || "badanswer".equals(r.outcome)) {
                    v.add(Verdict.CROSSED, "request " + key(h.node, h.incarnation, r.dest, r.seq) + " answered");
                }
            }
        }
    }

    /** Receives whose send is not in the join: unrecorded by a killed sender, or never sent at all. */
    private void judgeUnmatchedReceives(Map<String, List<History.Recv>> received, Map<String, History.Send> sent) {
        Map<String, History> senders = new HashMap<>();
        Map<String, Long> lastSeq = new HashMap<>();
        for (History h : histories) {
            senders.put(h.node + "." + h.incarnation, h);
            for (History.Send s : h.sends) {
                lastSeq.merge(h.node + "." + h.incarnation + ">" + s.dest, s.seq, Math::max);
            }
        }
        received.forEach((k, recs) -> {
            if (sent.containsKey(k)) {
                return;
            }
            String senderInc = k.substring(0, k.indexOf('>'));
            History sender = senders.get(senderInc);
            long seq = Long.parseLong(k.substring(k.indexOf('#') + 1));
            Long last = lastSeq.get(k.substring(0, k.indexOf('#')));
            if (sender == null) {
                v.note("no history of sender incarnation " + senderInc + " (it sent " + k + ")");
                v.add(Verdict.UNRECORDED, null);
            } else if (!sender.ended && (last == null || seq > last)) {
                v.add(Verdict.UNRECORDED, null);
            } else {
                v.add(Verdict.PHANTOM, k + " received, not in " + sender.name() + "'s sends");
            }
        });
    }
}
