package io.ibdxnet.bench;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.flush.FlushConsolidationHandler;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Histogram;

/**
 * The plain Netty 4.1 baseline over TCP loopback: length-prefixed messages
 * streamed from sender threads to a counting server ({@code uni}), or
 * request/echo round trips ({@code rtt}). No messaging stack on top: what
 * a hand-written Netty application gets. Same options and result line as
 * {@link Workload} ({@code impl=netty}).
 */
public final class NettyBaseline {
    private NettyBaseline() {}

    public static void main(String[] args) throws Exception {
        Results.Row row = new Results.Row();
        row.impl = "netty";
        for (int i = 0; i + 1 < args.length; i += 2) {
            String v = args[i + 1];
            switch (args[i]) {
                case "--pattern": row.pattern = v; break;
                case "--size": row.size = Integer.parseInt(v); break;
                case "--messages": row.messages = Long.parseLong(v); break;
                case "--threads": row.senders = Integer.parseInt(v); break;
                case "--transport": case "--fabric": case "--nodes": case "--handlers": break; // same command lines as Workload
                default:
                    System.err.println("netty baseline: unknown option " + args[i]);
                    System.exit(2);
            }
        }
        if (!row.pattern.equals("uni") && !row.pattern.equals("rtt")) {
            System.err.println("netty baseline: --pattern uni|rtt");
            System.exit(2);
        }
        EventLoopGroup server = new NioEventLoopGroup(1);
        EventLoopGroup client = new NioEventLoopGroup(1);
        AtomicLong received = new AtomicLong();
        SynchronousQueue<Boolean> answers = new SynchronousQueue<>();
        try {
            Channel listener = new ServerBootstrap().group(server).channel(NioServerSocketChannel.class)
                    .childOption(ChannelOption.TCP_NODELAY, true)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new LengthFieldBasedFrameDecoder(1 << 30, 0, 4, 0, 4),
                                    new SimpleChannelInboundHandler<ByteBuf>() {
                                        @Override
                                        protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                                            received.incrementAndGet();
                                            if (row.pattern.equals("rtt")) {
                                                ctx.writeAndFlush(ctx.alloc().buffer(4).writeInt(0));
                                            }
                                        }
                                    });
                        }
                    }).bind("127.0.0.1", 0).sync().channel();
            int port = ((java.net.InetSocketAddress) listener.localAddress()).getPort();
            Channel ch = new Bootstrap().group(client).channel(NioSocketChannel.class)
                    .option(ChannelOption.TCP_NODELAY, true)
                    .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(1 << 20, 4 << 20))
                    .handler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel c) {
                            c.pipeline().addLast(new FlushConsolidationHandler(256, true),
                                    new LengthFieldBasedFrameDecoder(1 << 30, 0, 4, 0, 4),
                                    new SimpleChannelInboundHandler<ByteBuf>() {
                                        @Override
                                        protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) throws InterruptedException {
                                            answers.put(Boolean.TRUE);
                                        }
                                    });
                        }
                    }).connect("127.0.0.1", port).sync().channel();
            Results.Row warm = row.copy();
            warm.messages = Math.max(1, Math.min(row.messages / 10, 20_000));
            run(ch, warm, received, answers, false);
            run(ch, row, received, answers, true);
            ch.close().sync();
            listener.close().sync();
        } finally {
            client.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS).sync();
            server.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS).sync();
        }
        row.peakRssBytes = Results.peakRssBytes();
        row.heapCommittedBytes = Results.heapCommittedBytes();
        System.out.println(row.line());
    }

    private static void run(Channel ch, Results.Row row, AtomicLong received, SynchronousQueue<Boolean> answers, boolean record)
            throws Exception {
        received.set(0);
        boolean rtt = row.pattern.equals("rtt");
        int threads = rtt ? 1 : row.senders;
        Histogram rtts = new Histogram(3_600_000_000_000L, 3);
        List<Thread> ts = new ArrayList<>();
        long cpu0 = Results.processCpuNanos();
        long t0 = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                byte[] payload = new byte[row.size];
                try {
                    for (long i = 0; i < row.messages; i++) {
                        if (!ch.isWritable()) {
                            ch.flush(); // what was written so far must go out before we wait
                            while (!ch.isWritable()) {
                                LockSupport.parkNanos(10_000); // the socket is behind: wait like a blocking send
                            }
                        }
                        ByteBuf b = ch.alloc().buffer(4 + row.size).writeInt(row.size).writeBytes(payload);
                        long s = System.nanoTime();
                        if (rtt || i % 64 == 63 || i == row.messages - 1) {
                            ch.writeAndFlush(b, ch.voidPromise());
                        } else {
                            ch.write(b, ch.voidPromise()); // batched like a stream: one flush per 64
                        }
                        if (rtt) {
                            answers.take();
                            rtts.recordValue(System.nanoTime() - s);
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) {
            th.join();
        }
        long expected = threads * row.messages;
        while (received.get() < expected) {
            Thread.sleep(0, 200_000);
        }
        if (record) {
            row.senders = threads;
            row.measured(expected, System.nanoTime() - t0, Results.processCpuNanos() - cpu0, rtt ? rtts : null);
        }
    }
}
