/**
 * DXNet-style messaging over InfiniBand (or TCP, or in-process): a node is a
 * {@link io.ibdxnet.DXNet}, configured by a {@link io.ibdxnet.DXNetConfig};
 * it sends {@link io.ibdxnet.Message}s, and {@link io.ibdxnet.Request}s that
 * are answered with {@link io.ibdxnet.Response}s. Failures are
 * {@link io.ibdxnet.NetworkException}s whose {@link io.ibdxnet.FailureReason}
 * says why.
 *
 * <p><b>Threads.</b> The transport's (ib: the native engine's send,
 * receive and job threads; nio: "dxnet-nio-N"); one message creation
 * coordinator ("dxnet-mcc-N") that turns received buffers into messages in
 * order; a pool of message handlers ("dxnet-handler-N-i"); a timeout thread
 * ("dxnet-timeouts-N"); a pool for queued async sends ("dxnet-deferred-N-i").
 *
 * <p><b>Order.</b> By default ({@link io.ibdxnet.DXNetConfig#orderPerSender})
 * the messages of one source node are handled one at a time, in the order
 * they arrived: what one thread sends to a node is handled there in the
 * order it was sent (messages of several sending threads interleave, each
 * whole). Messages of different sources are handled on different handler
 * threads at once, so a slow handler delays only later messages of its own
 * source. With {@code orderPerSender = false} any handler thread takes any
 * message: one sender's messages may be handled concurrently, in any order.
 * Responses never wait behind messages: they complete the request's future
 * as soon as they are received. {@code sendAsync} keeps the order without
 * blocking: a request it cannot send at once is queued for its node (a lane
 * per node), later async sends to that node queue behind it, and a
 * synchronous send to that node first waits (within its own deadline) until
 * what was queued before it went out.
 *
 * <p><b>Deadlines.</b> A request's timeout is one deadline from the call for
 * connecting, ring and window waits (at most {@code sendTimeoutMs} as well)
 * and the answer; {@code sendMessage} and {@code reply} wait up to
 * {@code sendTimeoutMs} ({@code handlerSendTimeoutMs} on a handler thread).
 *
 * <p>Every other package is internal: the module exports this one only.
 */
package io.ibdxnet;
