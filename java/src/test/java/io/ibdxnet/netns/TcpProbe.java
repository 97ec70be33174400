package io.ibdxnet.netns;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;

/**
 * {@link NetnsHostTest}'s listener: {@code TcpProbe ADDRESS} listens on
 * ADDRESS, prints {@code listening PORT}, accepts one connection and prints
 * {@code peer ADDRESS} (the connector's address as this host sees it).
 */
public final class TcpProbe {
    private TcpProbe() {}

    public static void main(String[] args) throws Exception {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName(args[0]))) {
            System.out.println("listening " + s.getLocalPort());
            try (Socket c = s.accept()) {
                System.out.println("peer " + c.getInetAddress().getHostAddress());
            }
        }
    }
}
