#!/bin/bash
# history-node.sh - one HistoryNode per VM, all to all over ib on rxe0 (fabric
# verbs) or nio, each writing its history into the shared output; the host then
# runs HistoryCheck over them (bench/cluster-matrix.sh and `./ibdxnet cluster-test` do both).
#   runs in every VM:  cluster.sh -n N -t T -- tools/cluster-vm/history-node.sh [TRANSPORT [SECONDS]]
# HISTORY_FAULT="loss 5" (fault.sh arguments) applies on every NIC first;
# HISTORY_FAULT_AT="5 down 2" (SECONDS, then fault.sh arguments) runs fault.sh in
# the background SECONDS after this node's first send reached its history, on the
# nodes HISTORY_FAULT_AT_NODES lists ("1", "0 1"; default every node), first
# instance only, under SCHED_FIFO (chrt -f 10: at nice -10 a busy JVM on the one
# vCPU still stretched a 1 s partition's commands to 2.2-3.1 s between their
# first and last line); it writes node-I.K.faults (sending-seen / fault-start /
# in-effect / lifting / fault-end: epoch ms of this VM's clock, the history's
# clock, and the guest uptime; in-effect to lifting is the fault's own window)
# into the shared output;
# HISTORY_ARGS adds HistoryNode options (rate, requests, deadline, ...);
# HISTORY_NODES="HOST:PORT,HOST:PORT,..." replaces the list made of CLUSTER_IPS;
# HISTORY_AUTH_KEYS="KEY0 KEY1 ..." gives node I the I-th word as its pre-shared
# key (IBDXNET_AUTH_KEY; "-" or a missing word: no key), so that nodes can hold
# different keys (bench/cluster-matrix.sh's key-mismatch and key-one-side).
# The node writes its transportStats (the engine's counters) as a `stats` line
# into its history at its orderly end.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
transport=${1:-ib} seconds=${2:-20}
me=$CLUSTER_NODE out=$CLUSTER_OUT port=22400
# HISTORY_NODES: the --nodes list itself (several nodes in one VM: one-vm-pair.sh).
nodes=${HISTORY_NODES:-$(for ip in $CLUSTER_IPS; do printf '%s:%s,' "$ip" "$port"; done)}
if [ -n "${HISTORY_AUTH_KEYS:-}" ]; then
	read -r -a keys <<< "$HISTORY_AUTH_KEYS"
	key=${keys[$me]:--}
	if [ "$key" = - ]; then
		unset IBDXNET_AUTH_KEY
		echo "history-node.sh[node$me]: no pre-shared key" >&2
	else
		export IBDXNET_AUTH_KEY=$key
		# never the key itself: its length and a hash prefix, to tell keys apart
		echo "history-node.sh[node$me]: pre-shared key of ${#key} bytes, sha256 $(printf '%s' "$key" | sha256sum | cut -c1-8)" >&2
	fi
fi
[ -z "${HISTORY_FAULT:-}" ] || "$CLUSTER_TOOLS/fault.sh" $HISTORY_FAULT || exit 1
fault_pid=""
fault_file=$out/node-$me.$CLUSTER_INSTANCE.faults
if [ -n "${HISTORY_FAULT_AT:-}" ] && [ "$CLUSTER_INSTANCE" = 0 ] &&
	[[ " ${HISTORY_FAULT_AT_NODES:-$me} " == *" $me "* ]]; then
	(
		stamp() { echo "$1	$(date +%s%3N)	uptime $(cut -d' ' -f1 /proc/uptime)${2:+	$2}"; }
		set -- $HISTORY_FAULT_AT
		at=$1; shift
		hist=$out/node-$me.$CLUSTER_INSTANCE.tsv
		# The first send line (histories flush every 100 ms): sending began.
		for ((i = 0; i < 3000; i++)); do grep -q '^send	' "$hist" 2>/dev/null && break; sleep 0.1; done
		stamp sending-seen >> "$fault_file"
		sleep "$at"
		stamp fault-start "$*" >> "$fault_file"
		FAULT_STAMPS=$fault_file "$CLUSTER_TOOLS/fault.sh" "$@"
		stamp fault-end "rc=$?" >> "$fault_file"
	) &
	fault_pid=$!
	chrt -f -p 10 "$fault_pid" >/dev/null || renice -n -10 -p "$fault_pid" >/dev/null
fi
# Single-threaded TCG: see tools/rxe-vm/java-in-vm.sh (AVX, C1 only).
export JAVA_TOOL_OPTIONS="-XX:UseAVX=0 -XX:TieredStopAtLevel=1"
# shellcheck disable=SC2086
java -cp "$(cat "$ROOT/build/main-classpath.txt")" -Djava.library.path="$ROOT/target/release" \
	io.ibdxnet.app.cluster.HistoryNode --node "$me" --nodes "${nodes%,}" --transport "$transport" --fabric verbs \
	--seconds "$seconds" --incarnation "$CLUSTER_INSTANCE" --history "$out/node-$me.$CLUSTER_INSTANCE.tsv" ${HISTORY_ARGS:-}
rc=$?
# A fault still waiting or running when the node is done: it no longer matters.
[ -z "$fault_pid" ] || { kill "$fault_pid" 2>/dev/null; wait "$fault_pid" 2>/dev/null; }
# Soft-RoCE's own counters (retransmissions, sequence errors, retry exceeded):
# what the wire did to the queue pairs.
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
	[ -r "$f" ] && printf '%s\t%s\n' "${f##*/}" "$(cat "$f")"
done > "$out/node-$me.$CLUSTER_INSTANCE.rxe-counters" 2>/dev/null
exit $rc
