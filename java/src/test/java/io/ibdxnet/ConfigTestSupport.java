package io.ibdxnet;

import static org.junit.Assert.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** What the DXNetConfig*Test classes share: a configuration file to load, the message of a refusal. */
final class ConfigTestSupport {
    private ConfigTestSupport() {}

    /** {@code text} as file {@code name} in a new temporary directory. */
    static Path write(String name, String text) throws Exception {
        Path dir = Files.createTempDirectory("dxnet-config");
        Path f = dir.resolve(name);
        Files.write(f, text.getBytes(StandardCharsets.UTF_8));
        return f;
    }

    /** The message of the IllegalArgumentException {@code r} throws. */
    static String refusal(String what, ThrowingRunnable r) throws Exception {
        try {
            r.run();
        } catch (IllegalArgumentException e) {
            return e.getMessage();
        }
        fail(what + " was accepted");
        return null;
    }

    /** What {@link #refusal} runs. */
    interface ThrowingRunnable {
        void run() throws Exception;
    }
}
