package io.ibdxnet.app.cluster;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One node incarnation's history as read back ({@link HistoryReader}): the
 * events of {@link HistoryLog}'s format, by kind. Plain data.
 */
final class History {
    /** The file it came from, for messages. */
    final String file;
    int node = -1;
    long incarnation = -1;
    String transport = "?";
    /** Whether the file has its {@code end} line (false: the process was killed). */
    boolean ended;
    /** The latest time of any event in the file. */
    long lastTime = Long.MIN_VALUE;
    final List<Send> sends = new ArrayList<>();
    final List<Loss> losses = new ArrayList<>();
    /** In file order, which is handler order for one source. */
    final List<Recv> recvs = new ArrayList<>();
    /** Requests sent, by "dest seq", in the order sent. */
    final Map<String, Req> requests = new LinkedHashMap<>();
    /** Times of the {@code tick} lines, ascending: when the process was running (not stopped). */
    final java.util.TreeSet<Long> ticks = new java.util.TreeSet<>();
    /** Requests this node handled, in file order (handler order for one source). */
    final List<Recv> handled = new ArrayList<>();

    History(String file) {
        this.file = file;
    }

    /**
     * How long the process ran strictly between {@code from} and {@code to},
     * by its ticks (one per {@link HistoryLog#FLUSH_MS} while it runs; none
     * while it is stopped).
     */
    long ranMs(long from, long to) {
        return to <= from ? 0 : (long) ticks.subSet(from, false, to, false).size() * HistoryLog.FLUSH_MS;
    }

    String name() {
        return "node " + node + " (incarnation " + incarnation + (ended ? "" : ", killed") + ")";
    }

    static final class Send {
        final long time;
        final int dest;
        final long seq;
        final int length;
        final int crc;
        /** Null if the library accepted it, else the {@code FailureReason} (or exception) it gave. */
        final String failure;

        Send(long time, int dest, long seq, int length, int crc, String failure) {
            this.time = time;
            this.dest = dest;
            this.seq = seq;
            this.length = length;
            this.crc = crc;
            this.failure = failure;
        }
    }

    static final class Loss {
        final long time;
        final int node;
        /** -1: the library did not know how many. */
        final long bytes;
        final String reason;

        Loss(long time, int node, long bytes, String reason) {
            this.time = time;
            this.node = node;
            this.bytes = bytes;
            this.reason = reason;
        }
    }

    /** A message received ({@code recv}) or a request handled ({@code reqhandled}; length and crc unknown: -1, 0). */
    static final class Recv {
        final long time;
        final int sender;
        final long senderIncarnation;
        final long seq;
        final int length;
        final int crc;
        final boolean intact;

        Recv(long time, int sender, long senderIncarnation, long seq, int length, int crc, boolean intact) {
            this.time = time;
            this.sender = sender;
            this.senderIncarnation = senderIncarnation;
            this.seq = seq;
            this.length = length;
            this.crc = crc;
            this.intact = intact;
        }
    }

    static final class Req {
        final long time;
        final int dest;
        final long seq;
        final int deadlineMs;
        /** answered, badanswer, failed, pending; null: no outcome recorded. */
        String outcome;
        String reason;
        long endTime;

        Req(long time, int dest, long seq, int deadlineMs) {
            this.time = time;
            this.dest = dest;
            this.seq = seq;
            this.deadlineMs = deadlineMs;
        }
    }
}
