#!/bin/bash
# smoke.sh - proof that RDMA crosses between two kernels; runs in every VM
# of a cluster:  tools/cluster-vm/cluster.sh -n 2 -t 600 -- tools/cluster-vm/smoke.sh
#
# Every node pings every other one (Ethernet + ARP on the segment). Then node
# 0 serves and node 1 connects, over rxe0 with the IPv4-mapped RoCE v2 GID:
#   1. ib_send_lat            (RC SEND latency, 2 bytes)
#   2. ib_send_bw --use-srq   (the server receives through an SRQ)
#   3. ib_send_lat --use-srq  (perftest ignores -I on rxe: "not recognized to
#      implement inline", so inline sends are not covered here)
#   4. xvm_imm_test: SEND_WITH_IMM, 2 SGEs, inline sends, SRQ, every byte,
#      length, immediate and the order checked (compiled in the VM with the
#      host's gcc)
#   5. ib_send_lat and xvm_imm_test with 5 % loss on node 1's NIC (fault.sh
#      loss 5): RC must retransmit and still complete; tc's drop counter
#      shows the loss.
# Nodes 2 and 3 only ping. Phases are kept in step through files in
# CLUSTER_OUT: node 0 writes PHASE.ready once its server listens.
# Exit 0 only if every step of this node passed. SMOKE_ITERS (1000) sets -n.

set -u -o pipefail
me=$CLUSTER_NODE out=$CLUSTER_OUT gid=$RXE_GID_INDEX
srv=${CLUSTER_IPS%% *}
iters=${SMOKE_ITERS:-1000}
fault=$CLUSTER_TOOLS/fault.sh
log() { echo "smoke[node$me] $(cut -d' ' -f1 /proc/uptime): $*"; }
fail=0
# iputils' ping may be missing on the host; the static busybox is always there.
ping() { if type -P ping >/dev/null; then command ping "$@"; else /bin/busybox ping "$@"; fi; }

log "rxe0 on $RXE_NETDEV ($RXE_IP, MTU $(cat /sys/class/net/$RXE_NETDEV/mtu)), GID $gid = $(cat /sys/class/infiniband/rxe0/ports/1/gids/$gid) ($(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$gid))"
ibv_devinfo -d rxe0 | grep -E 'state|active_mtu'

# The peers may boot later than this node: wait up to 4 minutes for each.
for ip in $CLUSTER_IPS; do
	[ "$ip" = "$RXE_IP" ] && continue
	for ((t = 0; t < 240; t++)); do ping -c1 -W1 -q "$ip" >/dev/null 2>&1 && break; done
	if ping -c 5 -i 0.2 -q "$ip" | tail -2; then log "ping $ip ok"; else log "ping $ip FAILED"; fail=1; fi
done

# phase NAME PROGRAM ARGS... : node 0 runs the server, node 1 the client.
phase() {
	local name=$1 rc try; shift
	if [ "$me" = 0 ]; then
		timeout 300 "$@" -d rxe0 -x "$gid" -n "$iters" > /tmp/$name.log 2>&1 &
		local pid=$!
		sleep 0.5; touch "$out/$name.ready"
		wait $pid; rc=$?
		log "$name server rc=$rc"; [ $rc = 0 ] || cat /tmp/$name.log
	else
		for ((try = 0; try < 600; try++)); do [ -e "$out/$name.ready" ] && break; sleep 0.5; done
		sleep 1
		# The server may still be between listen() and its ready file on a
		# slow host: retry a refused TCP connection, nothing else.
		for ((try = 0; try < 10; try++)); do
			timeout 300 "$@" -d rxe0 -x "$gid" -n "$iters" "$srv" > /tmp/$name.log 2>&1; rc=$?
			grep -q "Couldn't connect" /tmp/$name.log || break
			sleep 1
		done
		cat /tmp/$name.log
		log "$name client rc=$rc"
	fi
	[ $rc = 0 ] || fail=1
}

# xvm NAME: node 0 serves, node 1 connects (it retries the TCP connect).
xvm() {
	local name=$1 rc
	if [ "$me" = 0 ]; then timeout 300 "$xvm_bin" -g "$gid" -n "$iters"; rc=$?
	else timeout 300 "$xvm_bin" -g "$gid" -n "$iters" "$srv"; rc=$?; fi
	log "$name rc=$rc"
	[ $rc = 0 ] || fail=1
}

if [ "$me" -le 1 ]; then
	xvm_bin=/tmp/xvm_imm_test
	gcc -O2 -o "$xvm_bin" "$CLUSTER_TOOLS/xvm_imm_test.c" -libverbs || { log "gcc failed"; fail=1; }
	phase send_lat ib_send_lat
	phase send_bw_srq ib_send_bw --use-srq
	phase send_lat_srq ib_send_lat --use-srq
	xvm xvm_imm
	[ "$me" = 1 ] && "$fault" loss 5
	phase send_lat_loss5 ib_send_lat
	xvm xvm_imm_loss5
	if [ "$me" = 1 ]; then tc -s qdisc show dev "$RXE_NETDEV" | head -3; "$fault" clear; fi
fi
log "done, fail=$fail"
exit $fail
