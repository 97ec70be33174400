package io.ibdxnet.netns;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.ibdxnet.ChildJvm;
import io.ibdxnet.TestSupport;
import java.util.Arrays;
import java.util.Collections;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.Assume;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/** The harness itself: two namespaces joined by a link see each other at their own addresses, and close removes them. */
public class NetnsHostTest {
    @Rule
    public final Timeout timeout = TestSupport.minutes(2);

    @Test
    public void aConnectionBetweenTwoNamespacesComesFromTheOthersAddress() throws Exception {
        Assume.assumeTrue(NetnsHost.unavailableReason(), NetnsHost.available());
        String name;
        try (NetnsHost a = NetnsHost.create(); NetnsHost b = NetnsHost.create()) {
            name = a.name();
            String[] ab = NetnsHost.link(a, b);
            ChildJvm listener = a.startJava(TcpProbe.class, 1024, Collections.emptyList(), Arrays.asList(ab[0]));
            Matcher port = listener.awaitLine(Pattern.compile("listening (\\d+)"), 30_000);
            // bash's /dev/tcp: a connector without another JVM.
            Process connector = b.command(Arrays.asList("bash", "-c", "exec 3<>/dev/tcp/" + ab[0] + "/" + port.group(1)))
                    .redirectErrorStream(true).start();
            assertTrue(connector.waitFor(10, TimeUnit.SECONDS));
            assertEquals(0, connector.exitValue());
            listener.waitForExit(10_000);
            assertEquals(ab[1], listener.awaitLine(Pattern.compile("peer (\\S+)"), 30_000).group(1));
            assertTrue("the addresses are in the documentation ranges: " + ab[0] + " " + ab[1],
                    ab[0].startsWith("198.51.100.") || ab[0].startsWith("192.0.2."));
        }
        Process list = new ProcessBuilder("ip", "netns", "list").redirectErrorStream(true).start();
        String names = new String(list.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        assertTrue("closed namespace " + name + " still listed: " + names, !names.contains(name + " ") && !names.contains(name + "\n"));
    }
}
