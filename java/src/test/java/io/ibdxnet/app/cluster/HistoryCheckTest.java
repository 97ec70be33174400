package io.ibdxnet.app.cluster;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.After;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The checker on hand-written histories: each category is found where it
 * is and nowhere else, and a run with one unreported loss fails (the
 * negative control: a checker that passes everything passes nothing here).
 * Node 0 (incarnation 100) sends to node 1 (incarnation 200, or 201 after a
 * restart); times are small numbers of milliseconds.
 */
public class HistoryCheckTest {
    @Rule
    public final Timeout timeout = io.ibdxnet.TestSupport.minutes(1);

    private Path dir;

    @Before
    public void dir() throws IOException {
        dir = Files.createTempDirectory("history-check");
    }

    @After
    public void clean() throws IOException {
        try (java.util.stream.Stream<Path> s = Files.walk(dir)) {
            s.sorted(Collections.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    /** A history file being written by hand; {@link #end} adds the end line of a clean stop. */
    private final class File {
        final List<String> lines = new ArrayList<>();
        final String name;

        File(String name, int node, long incarnation) {
            this.name = name;
            add("start", 0, node, incarnation, "nio");
        }

        File add(String kind, long t, Object... fields) {
            StringBuilder b = new StringBuilder(kind).append('\t').append(t);
            for (Object f : fields) {
                b.append('\t').append(f);
            }
            lines.add(b.toString());
            return this;
        }

        File sent(long t, int dest, long seq) {
            return add("send", t, dest, seq, 64, crc(seq), "ok");
        }

        File recv(long t, int sender, long inc, long seq) {
            return add("recv", t, sender, inc, seq, 64, crc(seq), "ok");
        }

        File end(long t) {
            return add("end", t, "done");
        }

        void write() throws IOException {
            Files.write(dir.resolve(name), String.join("\n", lines).concat("\n").getBytes(StandardCharsets.UTF_8));
        }
    }

    private static int crc(long seq) {
        return (int) (seq * 31 + 7);
    }

    private Verdict check() throws IOException {
        return HistoryCheck.check("t", List.of(dir), 2000, 1000);
    }

    private int exit(String... options) {
        List<String> args = new ArrayList<>(List.of(options));
        args.add(dir.toString());
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        return HistoryCheck.run(args.toArray(new String[0]), new PrintStream(out, true));
    }

    /** Node 0 sent seq 0..n-1 to node 1, which got them all; both stopped cleanly. */
    private File[] clean(int n) {
        File a = new File("node-0.0.tsv", 0, 100);
        File b = new File("node-1.0.tsv", 1, 200);
        for (int i = 0; i < n; i++) {
            a.sent(10 + i, 1, i);
            b.recv(11 + i, 0, 100, i);
        }
        return new File[] {a, b};
    }

    private static void writeAll(File... files) throws IOException {
        for (File f : files) {
            f.write();
        }
    }

    @Test
    public void aCleanRunPasses() throws Exception {
        File[] f = clean(5);
        f[0].end(9000);
        f[1].end(9000);
        writeAll(f);
        Verdict v = check();
        assertEquals(5, v.count(Verdict.SENT));
        assertEquals(5, v.count(Verdict.DELIVERED));
        assertEquals(List.of(), v.failures(Collections.emptySet()));
        assertEquals(0, exit());
    }

    @Test
    public void oneUnreportedLossFails() throws Exception {
        File[] f = clean(5);
        f[0].sent(20, 1, 5); // never received, nothing reported
        f[0].end(9000);
        f[1].end(9000);
        writeAll(f);
        Verdict v = check();
        assertEquals(1, v.count(Verdict.LOST_UNREPORTED));
        assertEquals(5, v.count(Verdict.DELIVERED));
        assertEquals(1, exit());
        assertEquals("allowed, it passes", 0, exit("--allow", "lost-unreported"));
    }

    @Test
    public void aLossEventAfterTheSendWithEnoughBytesCoversIt() throws Exception {
        File[] f = clean(5);
        f[0].sent(20, 1, 5).sent(21, 1, 6).add("loss", 30, 1, 200, "connection reset");
        f[0].end(9000);
        f[1].end(9000);
        writeAll(f);
        Verdict v = check();
        assertEquals(2, v.count(Verdict.LOST_REPORTED));
        assertEquals(0, v.count(Verdict.LOST_UNREPORTED));
        assertEquals(0, exit());
    }

    @Test
    public void aLossEventWithUnknownBytesCoversEveryEarlierLoss() throws Exception {
        File[] f = clean(1);
        for (int i = 1; i < 50; i++) {
            f[0].sent(20 + i, 1, i);
        }
        f[0].add("loss", 100, 1, -1, "in flight on a closed connection").end(9000);
        f[1].end(9000);
        writeAll(f);
        assertEquals(49, check().count(Verdict.LOST_REPORTED));
    }

    @Test
    public void aLossEventThatReportsTooFewBytesLeavesTheRestUnreported() throws Exception {
        File[] f = clean(5);
        // Three messages of 64 bytes lost, 130 bytes reported: two fit, the oldest does not.
        f[0].sent(20, 1, 5).sent(21, 1, 6).sent(22, 1, 7).add("loss", 30, 1, 130, "reset").end(9000);
        f[1].end(9000);
        writeAll(f);
        Verdict v = check();
        assertEquals(2, v.count(Verdict.LOST_REPORTED));
        assertEquals(1, v.count(Verdict.LOST_UNREPORTED));
    }

    @Test
    public void aLossEventBeforeTheSendOrForAnotherNodeDoesNotCoverIt() throws Exception {
        File[] f = clean(5);
        f[0].add("loss", 15, 1, -1, "earlier").add("loss", 40, 2, -1, "another node").sent(20, 1, 5).end(9000);
        f[1].end(9000);
        writeAll(f);
        assertEquals(1, check().count(Verdict.LOST_UNREPORTED));
    }

    @Test
    public void duplicatesReorderingAndCorruptionAreEachFound() throws Exception {
        File a = new File("node-0.0.tsv", 0, 100);
        File b = new File("node-1.0.tsv", 1, 200);
        for (int i = 0; i < 6; i++) {
            a.sent(10 + i, 1, i);
        }
        b.recv(20, 0, 100, 0).recv(21, 0, 100, 2).recv(22, 0, 100, 1) // 1 after 2: reordered
                .recv(23, 0, 100, 2) // again: duplicated, not reordered
                .add("recv", 24, 0, 100, 3, 64, 12345, "ok") // checksum other than sent: corrupted
                .add("recv", 25, 0, 100, 4, 64, crc(4), "bad") // the receiver saw a bad body: corrupted
                .recv(26, 0, 100, 5);
        a.end(9000);
        b.end(9000);
        writeAll(a, b);
        Verdict v = check();
        assertEquals(1, v.count(Verdict.DUPLICATED));
        assertEquals(1, v.count(Verdict.REORDERED));
        assertEquals(2, v.count(Verdict.CORRUPTED));
        assertEquals(1, exit("--allow", "duplicated", "--allow", "reordered"));
        assertEquals(0, exit("--allow", "duplicated", "--allow", "reordered", "--allow", "corrupted",
                "--allow", "lost-unreported")); // seq 4 arrived only as a bad record: also lost
    }

    @Test
    public void aMessageWhoseSendFailedMustNotArrive() throws Exception {
        File[] f = clean(2);
        f[0].add("send", 20, 1, 2, 64, crc(2), "fail", "TIMEOUT", "window full").add("send", 21, 1, 3, 64, crc(3), "fail",
                "UNREACHABLE", "gone").end(9000);
        f[1].recv(22, 0, 100, 2).end(9000);
        writeAll(f);
        Verdict v = check();
        assertEquals(2, v.count(Verdict.SEND_FAILED));
        assertEquals(1, v.count(Verdict.DELIVERED_AFTER_FAILURE));
        assertEquals(0, v.count(Verdict.LOST_UNREPORTED));
    }

    @Test
    public void receivesWithoutASendAreUnrecordedOfAKilledSenderAndPhantomsOfACompleteOne() throws Exception {
        File[] f = clean(3);
        f[1].recv(30, 0, 100, 7); // beyond node 0's last recorded send, and node 0 was killed
        f[1].end(9000);
        writeAll(f);
        Verdict v = check();
        assertEquals(1, v.count(Verdict.UNRECORDED));
        assertEquals(0, v.count(Verdict.PHANTOM));
        f[0].end(9000); // the same, but node 0's history is complete: it never sent seq 7
        writeAll(f);
        v = check();
        assertEquals(1, v.count(Verdict.PHANTOM));
        assertEquals(1, exit());
    }

    @Test
    public void lossesOfAKilledSenderAreUnjudgedOnlyNearItsDeath() throws Exception {
        File[] f = clean(3);
        f[0].sent(100, 1, 3); // long before its death: the receiver is up, the loss is unreported
        f[0].sent(9500, 1, 4); // in its last 2 s: died with it
        f[0].add("conn", 10_000, 1, "up"); // its last record
        f[1].end(20_000);
        writeAll(f);
        Verdict v = check();
        assertEquals(1, v.count(Verdict.LOST_WITH_SENDER));
        assertEquals(1, v.count(Verdict.LOST_UNREPORTED));
    }

    @Test
    public void aRestartedReceiverCountsAsTheNodeAndOrderIsJudgedPerIncarnation() throws Exception {
        File a = new File("node-0.0.tsv", 0, 100);
        File b0 = new File("node-1.0.tsv", 1, 200);
        File b1 = new File("node-1.1.tsv", 1, 201);
        for (int i = 0; i < 6; i++) {
            a.sent(10 + i * 1000, 1, i);
        }
        b0.recv(11, 0, 100, 0).recv(1011, 0, 100, 1); // killed after seq 1
        a.add("loss", 2500, 1, 64, "node 1 died"); // seq 2 was in flight
        // 3..5 reached the new incarnation; 1 again there is a duplicate (across incarnations),
        // and not a reordering (order is judged per receiving incarnation).
        b1.recv(3011, 0, 100, 3).recv(4011, 0, 100, 4).recv(5011, 0, 100, 5).recv(5012, 0, 100, 1).end(9000);
        a.end(9000);
        writeAll(a, b0, b1);
        Verdict v = check();
        assertEquals(5, v.count(Verdict.DELIVERED));
        assertEquals(1, v.count(Verdict.LOST_REPORTED));
        assertEquals(0, v.count(Verdict.REORDERED));
        assertEquals(1, v.count(Verdict.DUPLICATED));
        assertEquals(3, v.incarnations().size());
        assertTrue(v.incarnations().toString(), v.incarnations().get(2).contains("4 received"));
        assertEquals(0, exit("--allow", "duplicated"));
    }

    @Test
    public void requestsAreAnsweredFailedByReasonHungOrUnjudged() throws Exception {
        File a = new File("node-0.0.tsv", 0, 100);
        File b = new File("node-1.0.tsv", 1, 200);
        a.sent(5, 1, 0);
        b.recv(6, 0, 100, 0);
        a.add("req", 10, 1, 0, 2000).add("reqend", 20, 1, 0, "answered", "-", "-");
        a.add("req", 11, 1, 1, 2000).add("reqend", 2011, 1, 1, "failed", "TIMEOUT", "no answer");
        a.add("req", 12, 1, 2, 2000).add("reqend", 500, 1, 2, "failed", "DISCONNECTED", "node 1 left");
        a.add("req", 13, 1, 3, 2000).add("reqend", 9000, 1, 3, "failed", "TIMEOUT", "7 s late"); // hung
        a.add("req", 14, 1, 4, 2000).add("reqend", 9000, 1, 4, "pending", "-", "open at the stop"); // hung
        a.add("req", 15, 1, 5, 2000).add("reqend", 30, 1, 5, "badanswer", "-", "-"); // corrupted
        b.add("reqhandled", 16, 0, 100, 0, "ok").add("reqhandled", 17, 0, 100, 0, "ok"); // handled twice
        for (int t = 2100; t < 9000; t += 100) {
            a.add("tick", t); // node 0 ran all along past those deadlines: the late ones hung
        }
        a.end(9100);
        b.end(9100);
        writeAll(a, b);
        Verdict v = check();
        assertEquals(6, v.count(Verdict.REQ_SENT));
        assertEquals(1, v.count(Verdict.REQ_ANSWERED));
        assertEquals(2, v.count(Verdict.REQ_FAILED));
        assertEquals(1, v.requestsFailed("TIMEOUT"));
        assertEquals(1, v.requestsFailed("DISCONNECTED"));
        assertEquals(2, v.count(Verdict.REQ_HUNG));
        assertEquals(1, v.count(Verdict.CORRUPTED));
        assertEquals(1, v.count(Verdict.DUPLICATED));
        assertEquals(1, exit("--allow", "corrupted", "--allow", "duplicated"));
        assertEquals(0, exit("--allow", "corrupted", "--allow", "duplicated", "--allow", "hung"));
    }

    @Test
    public void aLateOutcomeOfARequesterThatWasStoppedMeanwhileIsNotHung() throws Exception {
        File[] f = clean(1);
        // Sent just before its process was stopped (SIGSTOP) for 5 s: no tick from 50 to 5400, and
        // its timer ended the request right after it woke: 1 tick (100 ms of running) after the deadline.
        f[0].add("tick", 50).add("req", 60, 1, 0, 2000).add("tick", 5400)
                .add("reqend", 5410, 1, 0, "failed", "TIMEOUT", "no answer").add("tick", 5500).end(6000);
        f[1].end(6000);
        writeAll(f);
        Verdict v = check();
        assertEquals(0, v.count(Verdict.REQ_HUNG));
        assertEquals(1, v.requestsFailed("TIMEOUT"));
    }

    @Test
    public void aKilledSendersOpenRequestIsUnjudgedNearItsDeathAndHungLongBefore() throws Exception {
        File[] f = clean(1);
        f[0].add("req", 100, 1, 0, 2000); // no outcome, the node ran 10 s more: hung
        f[0].add("req", 9000, 1, 1, 2000); // no outcome, the node died 1 s later: unjudged
        for (int t = 100; t <= 10_000; t += 100) {
            f[0].add("tick", t);
        }
        f[1].end(10_000);
        writeAll(f);
        Verdict v = check();
        assertEquals(1, v.count(Verdict.REQ_HUNG));
        assertEquals(1, v.count(Verdict.REQ_UNJUDGED));
    }

    @Test
    public void aHalfWrittenLastLineIsSkippedAndANodeThatSentNothingFails() throws Exception {
        File[] f = clean(2);
        f[0].lines.add("send\t30\t1\t"); // the killed writer's last bytes
        writeAll(f);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        assertEquals(0, HistoryCheck.run(new String[] {dir.toString()}, new PrintStream(out, true)));
        assertTrue(out.toString(), out.toString().contains("1 unreadable line(s) skipped"));
        Files.write(dir.resolve("node-0.0.tsv"), "start\t0\t0\t100\tnio\n".getBytes(StandardCharsets.UTF_8));
        Files.delete(dir.resolve("node-1.0.tsv"));
        assertEquals("nothing sent: no clean run", 1, exit());
    }

    @Test
    public void nodesThatRefuseEachOtherPassOnlyIfNothingCrossed() throws Exception {
        File a = new File("node-0.0.tsv", 0, 100);
        File b = new File("node-1.0.tsv", 1, 200);
        a.add("send", 10, 1, 0, 64, crc(0), "fail", "TIMEOUT", "no connection");
        a.add("req", 20, 1, 0, 5000).add("reqend", 2020, 1, 0, "failed", "TIMEOUT", "-");
        b.add("send", 10, 0, 0, 64, crc(0), "fail", "TIMEOUT", "no connection");
        a.end(9000);
        b.end(9000);
        writeAll(a, b);
        assertEquals("nothing accepted: no clean run of the usual kind", 1, exit());
        assertEquals(0, exit("--refused"));
        assertEquals(0, HistoryCheck.check("t", List.of(dir), 2000, 1000, true).count(Verdict.CROSSED));
        b.lines.remove(b.lines.size() - 1);
        b.recv(30, 0, 100, 7).end(9000); // a message of another run, or one that got through
        a.lines.remove(a.lines.size() - 1);
        a.add("req", 40, 1, 1, 5000).add("reqend", 50, 1, 1, "answered", "-", "-").end(9000);
        writeAll(a, b);
        Verdict v = HistoryCheck.check("t", List.of(dir), 2000, 1000, true);
        assertEquals(2, v.count(Verdict.CROSSED));
        assertEquals(1, exit("--refused"));
        File c = new File("node-0.0.tsv", 0, 100);
        c.end(9000);
        File d = new File("node-1.0.tsv", 1, 200);
        d.end(9000);
        writeAll(c, d);
        assertEquals("nothing tried", 1, exit("--refused"));
    }

    @Test
    public void badCommandLinesAreRefused() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        assertEquals(2, HistoryCheck.run(new String[] {"--allow", "everything", dir.toString()}, new PrintStream(out)));
        assertEquals(2, HistoryCheck.run(new String[] {}, new PrintStream(out)));
    }
}
