/**
 * Hosts of their own for tests (issue 19): {@link io.ibdxnet.netns.NetnsHost}
 * makes Linux network namespaces joined by veth links, each with its own
 * address from the documentation ranges (only inside the namespaces), so a
 * bad or slow peer runs in its own process at its own address and address
 * checks meet real different hosts. Processes to run in them:
 * {@link io.ibdxnet.netns.NetnsNode} (a DXNet node driven over stdin: ping,
 * stats, quit) and {@link io.ibdxnet.netns.IdleSocketFlood} (idle sockets,
 * reopened when closed). Tests skip with the reason where namespaces cannot
 * be made ({@code Assume.assumeTrue(NetnsHost.unavailableReason(), NetnsHost.available())});
 * {@code io.ibdxnet.nio.IdleFloodAdmissionTest} shows the whole pattern.
 */
package io.ibdxnet.netns;
