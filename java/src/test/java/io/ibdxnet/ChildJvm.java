package io.ibdxnet;

import static org.junit.Assert.fail;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.rules.ExternalResource;

/**
 * A JVM a test starts for a node, a peer or a whole program: its command line
 * built the way every test needs it (this JDK, the test classpath, the
 * library path), its output in a log file, waits on that output, and a kill at
 * the end of the test when it is used through {@link Rule}.
 */
public final class ChildJvm {
    private final Process process;
    private final File log;
    private final List<String> command;

    private ChildJvm(Process process, File log, List<String> command) {
        this.process = process;
        this.log = log;
        this.command = command;
    }

    /** What a finished child printed and how it ended. */
    public static final class Result {
        public final int exit;
        public final String output;

        Result(int exit, String output) {
            this.exit = exit;
            this.output = output;
        }
    }

    /** The classpath of the tests (Gradle's worker hides it: build.gradle passes it on). */
    public static String testClasspath() {
        return System.getProperty("test.classpath", System.getProperty("java.class.path"));
    }

    /**
     * {@code java [jvmArgs] -cp <test classpath> -Djava.library.path=<this JVM's> main [args]},
     * with this JVM's {@code java}.
     */
    public static List<String> command(Class<?> main, List<String> jvmArgs, List<String> args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(System.getProperty("java.home") + "/bin/java");
        cmd.addAll(jvmArgs);
        cmd.addAll(Arrays.asList("-cp", testClasspath(), "-Djava.library.path=" + System.getProperty("java.library.path"),
                main.getName()));
        cmd.addAll(args);
        return cmd;
    }

    /**
     * {@code java [jvmArgs] -cp <classpath> -Djava.library.path=<this JVM's> mainClass [args]},
     * with this JVM's {@code java}: a main outside the test classpath (the bench's).
     */
    public static List<String> command(String mainClass, String classpath, List<String> jvmArgs, List<String> args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(System.getProperty("java.home") + "/bin/java");
        cmd.addAll(jvmArgs);
        cmd.addAll(Arrays.asList("-cp", classpath, "-Djava.library.path=" + System.getProperty("java.library.path"),
                mainClass));
        cmd.addAll(args);
        return cmd;
    }

    /** Starts {@code command}; stdout and stderr go to a fresh log file. */
    public static ChildJvm start(List<String> command, Map<String, String> env) throws IOException {
        File log = File.createTempFile("child-jvm", ".log");
        log.deleteOnExit();
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log);
        env.forEach((k, v) -> {
            if (v == null) {
                pb.environment().remove(k);
            } else {
                pb.environment().put(k, v);
            }
        });
        return new ChildJvm(pb.start(), log, command);
    }

    /**
     * Runs {@code command} to its end (killed after {@code timeoutMs}, which
     * fails the test); {@code env} entries with a null value are removed.
     */
    public static Result run(List<String> command, Map<String, String> env, long timeoutMs) throws Exception {
        ChildJvm c = start(command, env);
        try {
            return new Result(c.waitForExit(timeoutMs), c.output());
        } finally {
            c.kill();
        }
    }

    /** {@link #run} of {@link #command}, with the environment unchanged. */
    public static Result run(Class<?> main, List<String> jvmArgs, List<String> args, long timeoutMs) throws Exception {
        return run(command(main, jvmArgs, args), Map.of(), timeoutMs);
    }

    public Process process() {
        return process;
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** Everything the child printed so far. */
    public String output() throws IOException {
        return new String(Files.readAllBytes(log.toPath()), StandardCharsets.UTF_8);
    }

    /** Waits until the output contains {@code text}; fails (with the output) at the timeout or when the child ended. */
    public void awaitOutput(String text, long timeoutMs) throws Exception {
        awaitLine(Pattern.compile(Pattern.quote(text)), timeoutMs);
    }

    /** Waits until the output matches {@code p}; fails (with the output) at the timeout or when the child ended. */
    public Matcher awaitLine(Pattern p, long timeoutMs) throws Exception {
        return awaitLineAfter(0, p, timeoutMs);
    }

    /** The number of characters the child printed so far: a starting point for {@link #awaitLineAfter}. */
    public int outputLength() throws IOException {
        return output().length();
    }

    /**
     * Waits until the output after character {@code from} matches {@code p};
     * fails (with the output) at the timeout or when the child ended.
     */
    public Matcher awaitLineAfter(int from, Pattern p, long timeoutMs) throws Exception {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (true) {
            boolean alive = process.isAlive(); // before reading: the last output of an ended child counts
            String text = output();
            Matcher m = p.matcher(text.substring(Math.min(from, text.length())));
            if (m.find()) {
                return m;
            }
            if (!alive) {
                fail("no '" + p + "' before the child ended (exit " + process.exitValue() + "): " + output());
            }
            if (System.nanoTime() > end) {
                fail("no '" + p + "' within " + timeoutMs + " ms: " + output());
            }
            Thread.sleep(10);
        }
    }

    /** Writes {@code line} to the child's standard input. */
    public void tell(String line) throws IOException {
        process.getOutputStream().write((line + "\n").getBytes(StandardCharsets.UTF_8));
        process.getOutputStream().flush();
    }

    /** {@link #tell}s {@code command}, then waits for {@code answer} in what the child prints after it. */
    public Matcher ask(String command, Pattern answer, long timeoutMs) throws Exception {
        int from = outputLength();
        tell(command);
        return awaitLineAfter(from, answer, timeoutMs);
    }

    /** The exit code; fails (and kills the child) when it runs longer than {@code timeoutMs}. */
    public int waitForExit(long timeoutMs) throws Exception {
        if (!process.waitFor(timeoutMs, TimeUnit.MILLISECONDS)) {
            kill();
            fail(String.join(" ", command) + " did not end within " + timeoutMs + " ms:\n" + output());
        }
        return process.exitValue();
    }

    /** SIGKILL, and waits for the end. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    /** Starts children for one test and kills those still running after it. */
    public static final class Rule extends ExternalResource {
        private final List<ChildJvm> started = new ArrayList<>();

        public ChildJvm start(Class<?> main, List<String> jvmArgs, List<String> args) throws IOException {
            return start(command(main, jvmArgs, args), Map.of());
        }

        public synchronized ChildJvm start(List<String> command, Map<String, String> env) throws IOException {
            ChildJvm c = ChildJvm.start(command, env);
            started.add(c);
            return c;
        }

        @Override
        protected synchronized void after() {
            for (ChildJvm c : started) {
                try {
                    c.kill();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            started.clear();
        }
    }
}
