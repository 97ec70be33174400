package io.ibdxnet.app.cluster;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Judges the histories {@link HistoryNode}s wrote: every node's files, a
 * restarted node's several files (one per incarnation) among them, and
 * prints a table per scenario (the categories and what "reported" means:
 * {@link HistoryJudge}). Exit code 0 only if no failing category
 * ({@link Verdict#FAILING}: lost-unreported, duplicated, reordered,
 * corrupted, hung, delivered-after-failure, phantom; with {@code --refused}
 * also crossed) counts above 0, except
 * those named with {@code --allow}; 1 otherwise, 2 for a bad command line.
 *
 * <pre>
 * HistoryCheck [--allow CATEGORY]... [--crash-window-ms 2000] [--grace-ms 1000] [--refused]
 *              [--scenario NAME] DIR|FILE... [--scenario NAME DIR|FILE...]...
 * </pre>
 * {@code --refused}: the nodes must refuse each other (different
 * pre-shared keys, or a key on one side only): any message received,
 * request handled or answer received fails the run
 * ({@link Verdict#CROSSED}), and every send must fail or its loss be
 * reported as usual.
 * A directory stands for its {@code *.tsv} and {@code *.history} files.
 *
 * <p><b>Covered</b> (a loss counted as reported), in short — the exact
 * rules are {@link HistoryJudge}'s: an accepted message that no incarnation
 * of its destination recorded is covered when its sender's own incarnation
 * recorded possible-loss events for that destination dated at or after the
 * send began, whose reported bytes can hold it (lost messages placed latest
 * first, each event holding at most its byte count; unknown counts hold
 * any). A failed later send or a disconnect does not cover it. Losses of a
 * killed sender within {@code --crash-window-ms} of its last record died
 * with it and are not judged; receives of a killed sender's sends that never
 * reached its file are not judged either (counted apart).
 */
public final class HistoryCheck {
    private HistoryCheck() {}

    /** Short names for {@code --allow}. */
    static final Map<String, String> ALIASES = new LinkedHashMap<>();

    static {
        ALIASES.put("lost-unreported", Verdict.LOST_UNREPORTED);
        ALIASES.put("duplicated", Verdict.DUPLICATED);
        ALIASES.put("reordered", Verdict.REORDERED);
        ALIASES.put("corrupted", Verdict.CORRUPTED);
        ALIASES.put("hung", Verdict.REQ_HUNG);
        ALIASES.put("delivered-after-failure", Verdict.DELIVERED_AFTER_FAILURE);
        ALIASES.put("phantom", Verdict.PHANTOM);
    }

    public static void main(String[] args) {
        System.exit(run(args, System.out));
    }

    /** Runs the check; the exit code. */
    public static int run(String[] args, PrintStream out) {
        Set<String> allowed = new TreeSet<>();
        long crashWindowMs = 2000;
        long graceMs = 1000;
        boolean refused = false;
        Map<String, List<Path>> scenarios = new LinkedHashMap<>();
        String scenario = "history";
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--allow":
                        String c = ALIASES.get(value(args, ++i));
                        if (c == null) {
                            throw new IllegalArgumentException("--allow takes one of " + ALIASES.keySet());
                        }
                        allowed.add(c);
                        break;
                    case "--crash-window-ms": crashWindowMs = Long.parseLong(value(args, ++i)); break;
                    case "--grace-ms": graceMs = Long.parseLong(value(args, ++i)); break;
                    case "--scenario": scenario = value(args, ++i); break;
                    case "--refused": refused = true; break;
                    default:
                        if (args[i].startsWith("--")) {
                            throw new IllegalArgumentException("unknown option " + args[i]);
                        }
                        scenarios.computeIfAbsent(scenario, s -> new ArrayList<>()).add(Paths.get(args[i]));
                }
            }
            if (scenarios.isEmpty()) {
                throw new IllegalArgumentException("no history files given");
            }
        } catch (IllegalArgumentException e) {
            out.println("history-check: " + e.getMessage());
            out.println("usage: HistoryCheck [--allow " + String.join("|", ALIASES.keySet())
                    + "]... [--crash-window-ms MS] [--grace-ms MS] [--refused] [--scenario NAME] DIR|FILE... [--scenario NAME DIR|FILE...]...");
            return 2;
        }
        boolean pass = true;
        try {
            for (Map.Entry<String, List<Path>> s : scenarios.entrySet()) {
                Verdict v = check(s.getKey(), s.getValue(), crashWindowMs, graceMs, refused);
                v.print(out, allowed);
                pass &= v.failures(allowed).isEmpty();
            }
        } catch (IOException e) {
            out.println("history-check: " + e);
            return 2;
        }
        return pass ? 0 : 1;
    }

    /** Reads and judges one scenario's files (directories: their history files). */
    public static Verdict check(String scenario, List<Path> paths, long crashWindowMs, long graceMs) throws IOException {
        return check(scenario, paths, crashWindowMs, graceMs, false);
    }

    /**
     * The same; with {@code refused} the nodes promise to refuse each other
     * (different pre-shared keys): {@link Verdict#CROSSED} counts whatever
     * crossed, and a run in which nothing was tried fails instead of one in
     * which nothing was accepted.
     */
    public static Verdict check(String scenario, List<Path> paths, long crashWindowMs, long graceMs, boolean refused)
            throws IOException {
        List<History> histories = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        for (Path p : paths) {
            for (Path f : HistoryReader.files(p)) {
                HistoryReader.Result r = HistoryReader.read(f);
                if (r.badLines > 0) {
                    notes.add(f + ": " + r.badLines + " unreadable line(s) skipped");
                }
                if (r.history.node < 0) {
                    notes.add(f + ": no start line, skipped");
                    continue;
                }
                histories.add(r.history);
            }
        }
        Verdict v = new HistoryJudge(scenario, histories, crashWindowMs, graceMs, refused).judge();
        notes.forEach(v::note);
        return v;
    }

    private static String value(String[] args, int i) {
        if (i >= args.length) {
            throw new IllegalArgumentException(args[i - 1] + " needs a value");
        }
        return args[i];
    }
}
