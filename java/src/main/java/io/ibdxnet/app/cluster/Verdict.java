package io.ibdxnet.app.cluster;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * What {@link HistoryJudge} found in one scenario's histories: a count per
 * category (definitions in {@link HistoryJudge}), requests failed by reason,
 * a few examples of each failing category, and a line per incarnation.
 */
public final class Verdict {
    public static final String SENT = "sent (accepted)";
    public static final String SEND_FAILED = "send failed (told at once)";
    public static final String DELIVERED = "delivered";
    public static final String LOST_REPORTED = "lost-and-reported";
    public static final String LOST_UNREPORTED = "lost-unreported";
    public static final String LOST_WITH_SENDER = "lost with its killed sender";
    public static final String DUPLICATED = "duplicated";
    public static final String REORDERED = "reordered";
    public static final String CORRUPTED = "corrupted";
    public static final String DELIVERED_AFTER_FAILURE = "delivered though its send failed";
    public static final String PHANTOM = "received, never sent";
    public static final String UNRECORDED = "received, send unrecorded (sender killed)";
    public static final String REQ_SENT = "requests sent";
    public static final String REQ_ANSWERED = "requests answered";
    public static final String REQ_FAILED = "requests failed";
    public static final String REQ_HUNG = "requests hung past deadline";
    public static final String REQ_UNJUDGED = "requests open at the sender's death";
    /**
     * Only when the scenario promises that nodes refuse each other
     * ({@code HistoryCheck --refused}, e.g. different pre-shared keys):
     * each message received, request handled or answer received.
     */
    public static final String CROSSED = "received across the refusal";

    /** The categories that fail a run unless allowed (expected) on the command line. */
    public static final Set<String> FAILING = new TreeSet<>(Arrays.asList(LOST_UNREPORTED, DUPLICATED, REORDERED,
            CORRUPTED, REQ_HUNG, DELIVERED_AFTER_FAILURE, PHANTOM, CROSSED));

    private static final List<String> ORDER = Arrays.asList(SENT, SEND_FAILED, DELIVERED, LOST_REPORTED,
            LOST_UNREPORTED, LOST_WITH_SENDER, DUPLICATED, REORDERED, CORRUPTED, DELIVERED_AFTER_FAILURE, PHANTOM,
            UNRECORDED, REQ_SENT, REQ_ANSWERED, REQ_FAILED, REQ_HUNG, REQ_UNJUDGED, CROSSED);
    private static final int EXAMPLES = 5;

    public final String scenario;
    /** Whether the scenario promises that nothing crosses between nodes ({@link #CROSSED}). */
    public final boolean refused;
    private final Map<String, Long> counts = new LinkedHashMap<>();
    private final Map<String, Long> requestFailures = new TreeMap<>();
    private final Map<String, List<String>> examples = new TreeMap<>();
    private final List<String> incarnations = new ArrayList<>();
    private final List<String> notes = new ArrayList<>();

    Verdict(String scenario, boolean refused) {
        this.scenario = scenario;
        this.refused = refused;
        for (String c : ORDER) {
            counts.put(c, 0L);
        }
    }

    void add(String category, String example) {
        counts.merge(category, 1L, Long::sum);
        if (example != null && FAILING.contains(category)) {
            List<String> l = examples.computeIfAbsent(category, k -> new ArrayList<>());
            if (l.size() < EXAMPLES) {
                l.add(example);
            }
        }
    }

    void requestFailed(String reason) {
        add(REQ_FAILED, null);
        requestFailures.merge(reason, 1L, Long::sum);
    }

    void incarnation(String line) {
        incarnations.add(line);
    }

    void note(String line) {
        notes.add(line);
    }

    public long count(String category) {
        return counts.getOrDefault(category, 0L);
    }

    /** Requests failed with {@code reason} (a {@code FailureReason} name). */
    public long requestsFailed(String reason) {
        return requestFailures.getOrDefault(reason, 0L);
    }

    /** The per-incarnation lines ("node 1 (incarnation …): sent …, received …"). */
    public List<String> incarnations() {
        return incarnations;
    }

    /**
     * Failing categories with a count above 0 that {@code allowed} does not
     * list; a scenario in which nothing was accepted fails too (a node that
     * never ran must not pass as a clean run) — when nodes refuse each other
     * ({@link #refused}), one in which nothing was even tried.
     */
    public List<String> failures(Set<String> allowed) {
        List<String> out = new ArrayList<>();
        if (!refused && count(SENT) == 0) {
            out.add("nothing was sent");
        } else if (refused && count(SENT) + count(SEND_FAILED) + count(REQ_SENT) == 0) {
            out.add("nothing was tried");
        }
        for (String c : ORDER) {
            if (FAILING.contains(c) && count(c) > 0 && !allowed.contains(c)) {
                out.add(c);
            }
        }
        return out;
    }

    /** The table: one row per category, a mark on those that fail the run. */
    public void print(PrintStream out, Set<String> allowed) {
        out.printf("== scenario %s%n", scenario);
        for (String n : notes) {
            out.printf("   note: %s%n", n);
        }
        for (String i : incarnations) {
            out.printf("   %s%n", i);
        }
        out.printf("   %-44s %10s%n", "category", "count");
        for (String c : ORDER) {
            if (c.equals(CROSSED) && !refused) {
                continue;
            }
            long n = count(c);
            String mark = FAILING.contains(c) ? (n == 0 ? "" : allowed.contains(c) ? "  (allowed)" : "  <-- FAIL") : "";
            out.printf("   %-44s %10d%s%n", c, n, mark);
            if (c.equals(REQ_FAILED)) {
                requestFailures.forEach((r, k) -> out.printf("     %-42s %10d%n", "by " + r, k));
            }
        }
        examples.forEach((c, l) -> l.forEach(e -> out.printf("   e.g. %s: %s%n", c, e)));
        List<String> f = failures(allowed);
        out.printf("   verdict: %s%n", f.isEmpty() ? "PASS" : "FAIL (" + String.join(", ", f) + ")");
    }
}
