/*
 * xvm_imm_test.c - the verbs features the engine needs, across two kernels:
 * one RC QP per side over RoCE v2 (is_global=1, the peer's GID), receives
 * through an SRQ, SEND_WITH_IMM with 2 SGEs, every other small one
 * IBV_SEND_INLINE. The client sends COUNT messages of varying length; the
 * server checks each one's order, length, immediate and bytes, then answers
 * with one SEND_WITH_IMM carrying the count. QP numbers, PSNs and GIDs are
 * exchanged over TCP (port 18600).
 *
 *   server: xvm_imm_test [-d DEV] [-g GID_INDEX] [-n COUNT]
 *   client: xvm_imm_test [-d DEV] [-g GID_INDEX] [-n COUNT] SERVER_IP
 *   build:  gcc -O2 -o xvm_imm_test xvm_imm_test.c -libverbs
 * Exit 0 and "ALL OK" when every message arrived intact, 1 otherwise.
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PORT 1
#define TCP_PORT 18600
#define SLOT 4096   /* bytes per message slot: header + payload */
#define HDR 16
#define WINDOW 32   /* sends in flight at most (send queue depth 64) */

#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL: " __VA_ARGS__); \
	fprintf(stderr, "\n"); exit(1); } } while (0)

struct peer { uint32_t qpn, psn; uint8_t gid[16]; };

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_srq *srq;
static struct ibv_qp *qp;
static int gid_index = 1;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Payload length of message i: every 4th one 1..200 bytes (sent inline),
 * the others 1..3000 (several MTU-sized packets at RoCE MTU 1024). */
static uint32_t len_of(uint32_t i) { return i % 4u == 1u ? i % 200u + 1u : (i * 37u) % 3000u + 1u; }
static uint8_t byte_of(uint32_t i, uint32_t j) { return (uint8_t)(i * 7u + j); }

static int tcp_connect(const char *host)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(TCP_PORT) };
	CHECK(s >= 0, "socket");
	if (!host) {
		a.sin_addr.s_addr = htonl(INADDR_ANY);
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		CHECK(bind(s, (void *)&a, sizeof a) == 0 && listen(s, 1) == 0, "bind/listen %d", TCP_PORT);
		int c = accept(s, NULL, NULL);
		CHECK(c >= 0, "accept");
		close(s);
		return c;
	}
	CHECK(inet_pton(AF_INET, host, &a.sin_addr) == 1, "bad address %s", host);
	/* The server may not listen yet: retry for up to 60 s. */
	for (int t = 0; connect(s, (void *)&a, sizeof a) != 0; t++) {
		CHECK(t < 600, "connect %s:%d", host, TCP_PORT);
		close(s);
		s = socket(AF_INET, SOCK_STREAM, 0);
		usleep(100000);
	}
	return s;
}

static void xfer(int s, void *mine, void *theirs, size_t n)
{
	CHECK(write(s, mine, n) == (ssize_t)n, "tcp write");
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(s, (char *)theirs + got, n - got);
		CHECK(r > 0, "tcp read");
		got += r;
	}
}

static void connect_qp(const struct peer *p, enum ibv_mtu mtu, uint32_t my_psn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = PORT,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		IBV_QP_ACCESS_FLAGS), "to INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = p->qpn;
	a.rq_psn = p->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = PORT;
	memcpy(a.ah_attr.grh.dgid.raw, p->gid, 16);
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
		IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		IBV_QP_MIN_RNR_TIMER), "to RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = my_psn;
	a.timeout = 14;   /* 4.096 us * 2^14 = 67 ms: retransmits under loss */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
		IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC), "to RTS");
}

static void post_recv(struct ibv_mr *mr, char *buf, uint64_t id)
{
	struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = SLOT, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1 }, *bad;
	CHECK(!ibv_post_srq_recv(srq, &wr, &bad), "post_srq_recv");
}

/* One completion, blocking by polling; fails on any error status. */
static void poll1(struct ibv_wc *wc)
{
	double t0 = now();
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0)
		CHECK(now() - t0 < 120, "no completion in 120 s");
	CHECK(n == 1 && wc->status == IBV_WC_SUCCESS, "wc status %s (wr_id %llu)",
	      ibv_wc_status_str(wc->status), (unsigned long long)wc->wr_id);
}

int main(int argc, char **argv)
{
	const char *dev = "rxe0", *host = NULL;
	uint32_t count = 200, max_inline = 256;
	int o;
	while ((o = getopt(argc, argv, "d:g:n:")) != -1) {
		if (o == 'd') dev = optarg;
		else if (o == 'g') gid_index = atoi(optarg);
		else if (o == 'n') count = (uint32_t)atoi(optarg);
		else { fprintf(stderr, "usage: %s [-d DEV] [-g GID] [-n COUNT] [SERVER_IP]\n", argv[0]); return 2; }
	}
	if (optind < argc) host = argv[optind];
	CHECK(count >= 1 && count <= 4096, "count 1..4096");

	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list, "no devices");
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev)) ctx = ibv_open_device(list[i]);
	CHECK(ctx, "cannot open %s", dev);
	struct ibv_port_attr pa;
	CHECK(!ibv_query_port(ctx, PORT, &pa), "query_port");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 8192, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4100, .max_sge = 1 } };
	srq = ibv_create_srq(pd, &sa);
	CHECK(pd && cq && srq, "pd/cq/srq");
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_send_sge = 2, .max_inline_data = max_inline } };
	qp = ibv_create_qp(pd, &qa);
	CHECK(qp, "create_qp with max_inline_data %u", max_inline);
	max_inline = qa.cap.max_inline_data;

	size_t bytes = (size_t)(count + 1) * SLOT;
	char *buf = aligned_alloc(4096, bytes);
	CHECK(buf, "alloc");
	memset(buf, 0, bytes);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, bytes, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "reg_mr");

	struct peer me = { .qpn = qp->qp_num, .psn = (uint32_t)(now() * 1e6) & 0xffffff }, them;
	union ibv_gid g;
	CHECK(!ibv_query_gid(ctx, PORT, gid_index, &g), "query_gid %d", gid_index);
	memcpy(me.gid, g.raw, 16);
	char gs[64], ts[64];
	inet_ntop(AF_INET6, me.gid, gs, sizeof gs);
	printf("%s: %s gid[%d]=%s qpn=%u active_mtu=%d max_inline=%u count=%u\n",
	       host ? "client" : "server", dev, gid_index, gs, me.qpn, 128 << pa.active_mtu,
	       max_inline, count);

	/* Receives first: the server's for all messages, the client's for the
	 * answer (in the spare last slot, apart from its send buffers). */
	if (host)
		post_recv(mr, buf + (size_t)count * SLOT, count);
	for (uint32_t i = 0; !host && i < count; i++)
		post_recv(mr, buf + (size_t)i * SLOT, i);
	int s = tcp_connect(host);
	xfer(s, &me, &them, sizeof me);
	inet_ntop(AF_INET6, them.gid, ts, sizeof ts);
	printf("peer: gid=%s qpn=%u\n", ts, them.qpn);
	connect_qp(&them, pa.active_mtu, me.psn);
	char sync = 'r', got;
	xfer(s, &sync, &got, 1);   /* both QPs are RTS */

	struct ibv_wc wc;
	double t0 = now();
	if (host) {
		uint32_t inflight = 0, inlined = 0;
		for (uint32_t i = 0; i < count; i++) {
			char *h = buf + (size_t)i * SLOT, *p = h + HDR;
			uint32_t len = len_of(i);
			memcpy(h, &i, 4);
			memcpy(h + 4, &len, 4);
			for (uint32_t j = 0; j < len; j++) p[j] = byte_of(i, j);
			/* two SGEs: the header and the payload, from distinct places */
			struct ibv_sge sg[2] = { { (uintptr_t)h, HDR, mr->lkey }, { (uintptr_t)p, len, mr->lkey } };
			struct ibv_send_wr wr = { .wr_id = i, .sg_list = sg, .num_sge = 2,
				.opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				.imm_data = htonl(0xA5000000u | i) }, *bad;
			if ((i & 1) && HDR + len <= max_inline) { wr.send_flags |= IBV_SEND_INLINE; inlined++; }
			while (inflight >= WINDOW) { poll1(&wc); inflight--; }
			CHECK(!ibv_post_send(qp, &wr, &bad), "post_send %u", i);
			inflight++;
		}
		while (inflight) { poll1(&wc); inflight--; }
		double dt = now() - t0;
		do poll1(&wc); while (wc.opcode != IBV_WC_RECV);
		CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == count,
		      "answer imm %u, expected %u", ntohl(wc.imm_data), count);
		printf("client: %u SEND_WITH_IMM (2 SGEs, %u inline) sent in %.3f s (%.0f us each); answer imm=%u\n",
		       count, inlined, dt, dt * 1e6 / count, ntohl(wc.imm_data));
	} else {
		uint64_t total = 0;
		for (uint32_t i = 0; i < count; i++) {
			poll1(&wc);
			CHECK(wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM),
			      "message %u: opcode %d flags %#x", i, wc.opcode, wc.wc_flags);
			char *h = buf + wc.wr_id * SLOT, *p = h + HDR;
			uint32_t seq, len;
			memcpy(&seq, h, 4);
			memcpy(&len, h + 4, 4);
			CHECK(seq == i, "message %u arrived as number %u (order)", seq, i);
			CHECK(ntohl(wc.imm_data) == (0xA5000000u | i), "message %u: imm %#x", i, ntohl(wc.imm_data));
			CHECK(len == len_of(i) && wc.byte_len == HDR + len, "message %u: length %u/%u", i, wc.byte_len, len);
			for (uint32_t j = 0; j < len; j++)
				CHECK((uint8_t)p[j] == byte_of(i, j), "message %u: byte %u corrupt", i, j);
			total += wc.byte_len;
		}
		double dt = now() - t0;
		struct ibv_sge sg = { (uintptr_t)(buf + (size_t)count * SLOT), 4, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 1u << 31, .sg_list = &sg, .num_sge = 1,
			.opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
			.imm_data = htonl(count) }, *bad;
		CHECK(!ibv_post_send(qp, &wr, &bad), "post answer");
		poll1(&wc);
		printf("server: %u messages (%llu bytes) in order, lengths, imm and bytes intact, in %.3f s\n",
		       count, (unsigned long long)total, dt);
	}
	xfer(s, &sync, &got, 1);   /* neither side tears down before the other is done */
	close(s);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ALL OK\n");
	return 0;
}
