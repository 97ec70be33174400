package io.ibdxnet.app.cluster;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Reads {@link HistoryLog} files back. A line that does not parse (the
 * half-written last line of a killed process) is skipped and counted; kinds
 * it does not judge ({@code conn}, {@code drain}, {@code drained},
 * {@code note}, {@code stats}) are read past.
 */
final class HistoryReader {
    private HistoryReader() {}

    /** Every {@code *.tsv} or {@code *.history} file of a directory, or the file itself. */
    static List<Path> files(Path p) throws IOException {
        List<Path> out = new ArrayList<>();
        if (Files.isDirectory(p)) {
            try (Stream<Path> s = Files.list(p)) {
                s.filter(f -> f.getFileName().toString().matches(".*\\.(history|tsv)$")).sorted().forEach(out::add);
            }
        } else {
            out.add(p);
        }
        return out;
    }

    /** Lines of the file that could not be read (a killed writer's last, half-written line). */
    static final class Result {
        final History history;
        final int badLines;

        Result(History history, int badLines) {
            this.history = history;
            this.badLines = badLines;
        }
    }

    static Result read(Path file) throws IOException {
        History h = new History(file.toString());
        int bad = 0;
        try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                try {
                    parse(h, line.split("\t", -1));
                } catch (RuntimeException e) {
                    bad++;
                }
            }
        }
        return new Result(h, bad);
    }

    private static void parse(History h, String[] f) {
        long t = Long.parseLong(f[1]);
        switch (f[0]) {
            case "start":
                h.node = Integer.parseInt(f[2]);
                h.incarnation = Long.parseLong(f[3]);
                h.transport = f[4];
                break;
            case "send":
                h.sends.add(new History.Send(t, Integer.parseInt(f[2]), Long.parseLong(f[3]), Integer.parseInt(f[4]),
                        Integer.parseInt(f[5]), f[6].equals("ok") ? null : need(f, 7)));
                break;
            case "loss":
                h.losses.add(new History.Loss(t, Integer.parseInt(f[2]), Long.parseLong(f[3]), f.length > 4 ? f[4] : ""));
                break;
            case "recv":
                h.recvs.add(new History.Recv(t, Integer.parseInt(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]),
                        Integer.parseInt(f[5]), Integer.parseInt(f[6]), ok(f[7])));
                break;
            case "req":
                History.Req r = new History.Req(t, Integer.parseInt(f[2]), Long.parseLong(f[3]), Integer.parseInt(f[4]));
                h.requests.put(r.dest + " " + r.seq, r);
                break;
            case "reqend":
                History.Req q = h.requests.get(Integer.parseInt(f[2]) + " " + Long.parseLong(f[3]));
                if (q == null) {
                    throw new IllegalArgumentException("an outcome without its request");
                }
                q.outcome = need(f, 4);
                q.reason = f.length > 5 ? f[5] : "-";
                q.endTime = t;
                break;
            case "reqhandled":
                h.handled.add(new History.Recv(t, Integer.parseInt(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]), -1,
                        0, ok(f[5])));
                break;
            case "tick":
                h.ticks.add(t);
                break;
            case "end":
                h.ended = true;
                break;
            default:
                break; // conn, drain, drained, note, stats: for people (and scripts) reading the file
        }
        h.lastTime = Math.max(h.lastTime, t);
    }

    private static boolean ok(String v) {
        if (!v.equals("ok") && !v.equals("bad")) {
            throw new IllegalArgumentException("ok or bad: " + v);
        }
        return v.equals("ok");
    }

    private static String need(String[] f, int i) {
        if (i >= f.length || f[i].isEmpty()) {
            throw new IllegalArgumentException("field " + i + " missing");
        }
        return f[i];
    }
}
