/**
 * A node's counters for people who scrape them: JMX MBeans
 * ({@code io.ibdxnet:type=Node,node=<id>} for the core,
 * {@code io.ibdxnet:type=Node,node=<id>,transport=<ib|nio|loopback>} for the
 * transport, the native engine's statistics with its timers on ib) and the
 * periodic statistics line ({@code statsIntervalMs}). Internal: it reads the
 * counters through suppliers and uses nothing else of ours.
 */
package io.ibdxnet.metrics;
