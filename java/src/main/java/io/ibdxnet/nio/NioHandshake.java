package io.ibdxnet.nio;

import io.ibdxnet.nio.NioWire.Refusal;
import io.ibdxnet.transport.AuthKey;
import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Logger;
import javax.crypto.Mac;

/**
 * Both sides of the NIO handshake ({@link NioWire}): who may connect (a
 * known node id, from an address the node table gives for it, with the
 * pre-shared key if one is set) and the counters of refused hellos. Runs on
 * the selector thread; {@link #addNode} and {@link #stats} from any thread.
 */
final class NioHandshake {
    private static final Logger LOG = Logger.getLogger(NioHandshake.class.getName());
    private static final byte[] DOMAIN = "ibdxnet nio handshake v4".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    /** Connector nonces remembered to tell a replayed hello (older replays fail the proof instead). */
    private static final int NONCES_KEPT = 4096;
    /** Refusal log lines per second at most (a flood is counted, not logged line by line). */
    private static final int LOG_PER_SECOND = 10;

    /** What the transport does after a handshake read. */
    enum Step {
        /** Flush what was written to the channel's control buffer, read on. */
        CONTINUE,
        /** Outgoing: the connection is open. */
        OPEN,
        /** Incoming: every check passed; the transport checks for a duplicate, then {@link #accept} or {@link #refuse}. */
        ACCEPT,
        /** Incoming: a refusal was written and counted; flush it and close. */
        REFUSED,
        /** Incoming: not a DXNet peer; close without a reply. */
        DROP
    }

    /** The handshake state of one channel. */
    static final class Pending {
        /** Outgoing: waiting for the reply, then the challenge, then the final reply; incoming: head, hello, proof. */
        int step;
        /** Incoming: the node the hello claims. */
        int source = -1;
        long peerInstance;
        /** Incoming: the connector's flow-control unit (we confirm its bytes in it). */
        long peerUnit;
        byte[] ownNonce;
        byte[] peerNonce;
    }

    private final int nodeId;
    private final long instance;
    /** Our flow-control unit, told to every node we connect to. */
    private final long flowUnit;
    private final AuthKey key;
    private final Mac mac;
    private final boolean checkAddress;
    private final SecureRandom random = new SecureRandom();
    /** Per node: the addresses a hello claiming it may come from. */
    private final Map<Integer, InetAddress[]> addresses = new ConcurrentHashMap<>();
    /** Per address: how many nodes of the table are at it (changed under its own lock, read by the selector thread). */
    private final Map<InetAddress, Integer> atAddress = new ConcurrentHashMap<>();
    private final Map<ByteBuffer, Boolean> nonces = new LinkedHashMap<ByteBuffer, Boolean>() {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<ByteBuffer, Boolean> eldest) {
            return size() > NONCES_KEPT;
        }
    };
    private final Map<String, AtomicLong> refused = new LinkedHashMap<>();
    private final AtomicLong peerUnauthenticated = new AtomicLong();
    private final AtomicLong abandoned = new AtomicLong();
    private long logSecond;
    private int loggedThisSecond;

    NioHandshake(int nodeId, long instance, long flowUnit, AuthKey key, boolean checkAddress) {
        this.nodeId = nodeId;
        this.instance = instance;
        this.flowUnit = flowUnit;
        this.key = key;
        this.mac = key == null ? null : key.newMac();
        this.checkAddress = checkAddress;
        for (String s : new String[] {"bad_magic", "version", "destination", "unknown_node", "address", "unauthenticated",
            "unexpected_key", "replayed", "flow_unit", "duplicate", "timeout", "busy"}) {
            refused.put(s, new AtomicLong());
        }
    }

    boolean keyed() {
        return key != null;
    }

    /** Resolves {@code host} once: a hello claiming {@code id} must come from one of its addresses. */
    void addNode(int id, String host) {
        InetAddress[] all;
        try {
            all = InetAddress.getAllByName(host);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("node " + id + ": host '" + host + "' does not resolve");
        }
        List<InetAddress> usable = new ArrayList<>();
        for (InetAddress a : all) {
            if (!a.isAnyLocalAddress()) {
                usable.add(a); // a wildcard entry says where to connect, not who may connect
            }
        }
        InetAddress[] now = usable.toArray(new InetAddress[0]);
        synchronized (atAddress) {
            InetAddress[] before = addresses.put(id, now);
            if (before != null) {
                for (InetAddress a : before) {
                    atAddress.computeIfPresent(a, (k, n) -> n == 1 ? null : n - 1);
                }
            }
            for (InetAddress a : now) {
                atAddress.merge(a, 1, Integer::sum);
            }
        }
    }

    /** True if the node table has a node at {@code a} (wildcard entries name no address). */
    boolean knownAddress(InetAddress a) {
        return atAddress.containsKey(a);
    }

    void count(String stat) {
        refused.get(stat).incrementAndGet();
    }

    /** Total refused hellos (the transport's {@code rejected}). */
    long refusedTotal() {
        long n = 0;
        for (AtomicLong v : refused.values()) {
            n += v.get();
        }
        return n;
    }

    void stats(Map<String, Long> m) {
        for (Map.Entry<String, AtomicLong> e : refused.entrySet()) {
            m.put("hellos_refused_" + e.getKey(), e.getValue().get());
        }
        m.put("handshakes_peer_unauthenticated", peerUnauthenticated.get());
        m.put("handshakes_abandoned", abandoned.get());
    }

    // ---- connector ----

    /** Writes our hello to {@code c.control} and prepares to read the reply. */
    void start(NioChannel c) {
        Pending p = new Pending();
        p.ownNonce = new byte[NioWire.NONCE];
        if (key != null) {
            random.nextBytes(p.ownNonce);
        }
        c.handshake = p;
        NioWire.putHello(c.control, key != null ? NioWire.HELLO_KEYED : 0, nodeId, c.peer(), instance, p.ownNonce, flowUnit);
        c.small.clear().limit(NioWire.REPLY);
    }

    /** {@code c.small} holds what the connector waited for; errors name the node and the reason. */
    Step onConnectorRead(NioChannel c, long now) throws IOException {
        Pending p = c.handshake;
        ByteBuffer b = c.small;
        if (p.step == 1) {
            return onChallenge(c, p, b, now);
        }
        int magic = b.getInt(0);
        int status = b.getShort(4) & 0xFFFF;
        int node = b.getShort(6) & 0xFFFF;
        if (magic != NioWire.MAGIC || node != c.peer()) {
            throw NioFailure.HANDSHAKE.exception("the peer at " + c.remote() + " is not DXNet node " + c.peer());
        }
        if (status == NioWire.REPLY_OK && (key == null || p.step == 2)) {
            return Step.OPEN;
        }
        if (status == NioWire.REPLY_CHALLENGE && key != null && p.step == 0) {
            p.step = 1;
            b.limit(NioWire.REPLY + NioWire.CHALLENGE);
            return Step.CONTINUE;
        }
        if (status == NioWire.REPLY_OK && key != null) {
            peerUnauthenticated.incrementAndGet();
            throw NioFailure.HANDSHAKE.exception("node " + c.peer() + " at " + c.remote()
                    + " accepted us without proving the pre-shared key (not node " + c.peer() + "?)");
        }
        if (status == NioWire.REPLY_OK || status == NioWire.REPLY_CHALLENGE) {
            throw NioFailure.HANDSHAKE.exception("node " + c.peer() + " broke the handshake (status " + status + " at step " + p.step + ")");
        }
        throw NioFailure.HANDSHAKE.exception("node " + c.peer() + " refused the connection: " + NioWire.replyText(status));
    }

    private Step onChallenge(NioChannel c, Pending p, ByteBuffer b, long now) throws IOException {
        p.peerInstance = b.getLong(NioWire.REPLY);
        p.peerNonce = new byte[NioWire.NONCE];
        byte[] theirs = new byte[NioWire.PROOF];
        b.position(NioWire.REPLY + 8);
        b.get(p.peerNonce).get(theirs);
        byte[] expected = proof(NioWire.ROLE_ACCEPTOR, nodeId, c.peer(), instance, p.peerInstance, flowUnit, p.ownNonce, p.peerNonce);
        // Our proof goes out even when theirs is wrong: the acceptor then counts and logs the refusal too.
        c.control.put(proof(NioWire.ROLE_CONNECTOR, nodeId, c.peer(), instance, p.peerInstance, flowUnit, p.ownNonce, p.peerNonce));
        if (!MessageDigest.isEqual(expected, theirs)) {
            peerUnauthenticated.incrementAndGet();
            c.flush(now);
            throw NioFailure.HANDSHAKE.exception("node " + c.peer() + " at " + c.remote()
                    + " could not prove the pre-shared key (a different key, or not node " + c.peer() + ")");
        }
        p.step = 2;
        b.clear().limit(NioWire.REPLY);
        return Step.CONTINUE;
    }

    // ---- acceptor ----

    /** Prepares an accepted channel to read a hello. */
    void accepted(NioChannel c) {
        c.handshake = new Pending();
        c.small.clear().limit(NioWire.HELLO_HEAD);
    }

    /** {@code c.small} holds what the acceptor waited for. */
    Step onAcceptorRead(NioChannel c) {
        Pending p = c.handshake;
        ByteBuffer b = c.small;
        switch (p.step) {
            case 0:
                if (b.getInt(0) != NioWire.MAGIC) {
                    count("bad_magic");
                    log(c, " refused: not a DXNet peer (bad magic)");
                    return Step.DROP;
                }
                if ((b.getShort(4) & 0xFFFF) != NioWire.VERSION) {
                    return refuse(c, Refusal.BAD_VERSION);
                }
                p.step = 1;
                b.limit(NioWire.HELLO);
                return Step.CONTINUE;
            case 1:
                return onHello(c, p, b);
            default:
                return onProof(c, p, b);
        }
    }

    private Step onHello(NioChannel c, Pending p, ByteBuffer b) {
        boolean keyedPeer = (b.getShort(6) & NioWire.HELLO_KEYED) != 0;
        p.source = b.getShort(8) & 0xFFFF;
        int destination = b.getShort(10) & 0xFFFF;
        p.peerInstance = b.getLong(16);
        p.peerNonce = new byte[NioWire.NONCE];
        b.position(24);
        b.get(p.peerNonce);
        p.peerUnit = b.getLong(40);
        InetAddress[] allowed = addresses.get(p.source);
        if (destination != nodeId) {
            return refuse(c, Refusal.WRONG_DESTINATION);
        } else if (allowed == null) {
            return refuse(c, Refusal.UNKNOWN_NODE);
        } else if (checkAddress && !contains(allowed, c.remoteAddress)) {
            return refuse(c, Refusal.ADDRESS);
        } else if (key != null && !keyedPeer) {
            return refuse(c, Refusal.KEY_REQUIRED);
        } else if (key == null && keyedPeer) {
            return refuse(c, Refusal.KEY_UNEXPECTED);
        } else if (!io.ibdxnet.transport.Confirmations.acceptable(p.peerUnit)) {
            // A trust boundary: an absurd unit would make us confirm every few bytes, or overflow.
            return refuse(c, Refusal.FLOW_UNIT);
        } else if (key == null) {
            return Step.ACCEPT;
        }
        if (nonces.put(ByteBuffer.wrap(p.peerNonce), Boolean.TRUE) != null) {
            return refuse(c, Refusal.REPLAYED);
        }
        p.ownNonce = new byte[NioWire.NONCE];
        random.nextBytes(p.ownNonce);
        NioWire.putReply(c.control, NioWire.REPLY_CHALLENGE, nodeId);
        c.control.putLong(instance).put(p.ownNonce)
                .put(proof(NioWire.ROLE_ACCEPTOR, p.source, nodeId, p.peerInstance, instance, p.peerUnit, p.peerNonce, p.ownNonce));
        p.step = 2;
        b.clear().limit(NioWire.PROOF);
        return Step.CONTINUE;
    }

    private Step onProof(NioChannel c, Pending p, ByteBuffer b) {
        byte[] theirs = new byte[NioWire.PROOF];
        b.position(0);
        b.get(theirs);
        byte[] expected = proof(NioWire.ROLE_CONNECTOR, p.source, nodeId, p.peerInstance, instance, p.peerUnit, p.peerNonce, p.ownNonce);
        return MessageDigest.isEqual(expected, theirs) ? Step.ACCEPT : refuse(c, Refusal.WRONG_PROOF);
    }

    /** Writes the final OK (the transport registers the channel). */
    void accept(NioChannel c) {
        NioWire.putReply(c.control, NioWire.REPLY_OK, nodeId);
        c.handshake = null;
    }

    /** Writes, counts and logs a refusal. */
    Step refuse(NioChannel c, Refusal r) {
        NioWire.putReply(c.control, r.status, nodeId);
        count(r.stat);
        int claimed = c.handshake == null ? -1 : c.handshake.source;
        log(c, (claimed >= 0 ? " claiming node " + claimed : "") + " refused: " + r.acceptorText);
        return Step.REFUSED;
    }

    /** An incoming connection ended (closed, reset) before its handshake was done. */
    void abandoned(NioChannel c, String reason) {
        abandoned.incrementAndGet();
        int claimed = c.handshake == null ? -1 : c.handshake.source;
        log(c, (claimed >= 0 ? " claiming node " + claimed : "") + " ended during the handshake: " + reason);
    }

    /** An incoming connection did not finish its handshake in time: counted, closed by the transport. */
    void timedOut(NioChannel c, int timeoutMs) {
        count("timeout");
        int claimed = c.handshake == null ? -1 : c.handshake.source;
        log(c, (claimed >= 0 ? " claiming node " + claimed : "") + " closed: no complete handshake within " + timeoutMs + " ms");
    }

    private void log(NioChannel c, String what) {
        long second = System.nanoTime() / 1_000_000_000L;
        if (second != logSecond) {
            logSecond = second;
            loggedThisSecond = 0;
        }
        if (loggedThisSecond++ < LOG_PER_SECOND) {
            LOG.warning("node " + nodeId + ": connection from " + c.remote() + what);
        }
    }

    private static boolean contains(InetAddress[] allowed, InetAddress a) {
        for (InetAddress x : allowed) {
            if (x.equals(a)) {
                return true;
            }
        }
        return false;
    }

    /**
     * The proof of {@code role} over everything both sides said (layout: {@link NioWire}),
     * the connector's flow-control unit included: nobody without the key can change it.
     */
    private byte[] proof(int role, int source, int destination, long connectorInstance, long acceptorInstance,
            long connectorUnit, byte[] connectorNonce, byte[] acceptorNonce) {
        ByteBuffer fields = ByteBuffer.allocate(1 + 2 + 2 + 2 + 8 + 8 + 8);
        fields.put((byte) role).putShort(NioWire.VERSION).putShort((short) source).putShort((short) destination)
                .putLong(connectorInstance).putLong(acceptorInstance).putLong(connectorUnit);
        mac.update(DOMAIN);
        mac.update(fields.array());
        mac.update(connectorNonce);
        mac.update(acceptorNonce);
        return mac.doFinal();
    }
}
