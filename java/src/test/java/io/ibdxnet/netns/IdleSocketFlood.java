package io.ibdxnet.netns;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.Iterator;
import java.util.concurrent.DelayQueue;
import java.util.concurrent.Delayed;
import java.util.concurrent.TimeUnit;

/**
 * A hostile client (for {@link NetnsHost}): {@code IdleSocketFlood HOST PORT
 * COUNT REOPEN_MS} keeps COUNT TCP connections to HOST:PORT open, says nothing
 * on them, and reopens each one the server closes REOPEN_MS later. Every
 * second it prints {@code flood open=N connects=C closed=K} (open: connected
 * and not yet closed by the server).
 */
public final class IdleSocketFlood {
    private IdleSocketFlood() {}

    /** A connection to reopen at {@code at}. */
    private static final class Reopen implements Delayed {
        final long at;

        Reopen(long at) {
            this.at = at;
        }

        @Override
        public long getDelay(TimeUnit unit) {
            return unit.convert(at - System.nanoTime(), TimeUnit.NANOSECONDS);
        }

        @Override
        public int compareTo(Delayed o) {
            return Long.compare(at, ((Reopen) o).at);
        }
    }

    public static void main(String[] args) throws IOException {
        InetSocketAddress target = new InetSocketAddress(args[0], Integer.parseInt(args[1]));
        int count = Integer.parseInt(args[2]);
        long reopenNanos = TimeUnit.MILLISECONDS.toNanos(Long.parseLong(args[3]));
        Selector selector = Selector.open();
        DelayQueue<Reopen> reopen = new DelayQueue<>();
        for (int i = 0; i < count; i++) {
            reopen.add(new Reopen(System.nanoTime()));
        }
        ByteBuffer sink = ByteBuffer.allocate(4096);
        long open = 0;
        long connects = 0;
        long closed = 0;
        long nextReport = System.nanoTime();
        while (true) {
            Reopen r;
            while ((r = reopen.poll()) != null) {
                try {
                    SocketChannel s = SocketChannel.open();
                    s.configureBlocking(false);
                    s.connect(target);
                    s.register(selector, SelectionKey.OP_CONNECT);
                    connects++;
                } catch (IOException e) {
                    reopen.add(new Reopen(System.nanoTime() + reopenNanos)); // out of ports or fds: later
                }
            }
            selector.select(10);
            Iterator<SelectionKey> it = selector.selectedKeys().iterator();
            while (it.hasNext()) {
                SelectionKey k = it.next();
                it.remove();
                SocketChannel s = (SocketChannel) k.channel();
                // Attached once connected (a failed finishConnect closes the channel and cancels the key).
                boolean connected = k.attachment() != null;
                boolean ended = false;
                try {
                    if (!connected) {
                        if (s.finishConnect()) {
                            k.attach(Boolean.TRUE);
                            k.interestOps(SelectionKey.OP_READ);
                            open++;
                        }
                    } else {
                        sink.clear();
                        ended = s.read(sink) < 0;
                    }
                } catch (IOException e) {
                    ended = true;
                }
                if (ended) {
                    if (connected) {
                        open--;
                    }
                    closed++;
                    k.cancel();
                    s.close();
                    reopen.add(new Reopen(System.nanoTime() + reopenNanos));
                }
            }
            long now = System.nanoTime();
            if (now - nextReport >= 0) {
                System.out.println("flood open=" + open + " connects=" + connects + " closed=" + closed);
                nextReport = now + 1_000_000_000L;
            }
        }
    }
}
