#!/bin/bash
# history-node.sh - one HistoryNode per VM, all to all over ib on rxe0 (fabric
# verbs) or nio, each writing its history into the shared output; the host then
# runs HistoryCheck over them (tools/cluster-vm/history.sh does both).
#   runs in every VM:  cluster.sh -n N -t T -- tools/cluster-vm/history-node.sh [TRANSPORT [SECONDS]]
# HISTORY_FAULT="loss 5" (fault.sh arguments) applies on every NIC first;
# HISTORY_ARGS adds HistoryNode options (rate, requests, deadline, ...).
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
transport=${1:-ib} seconds=${2:-20}
me=$CLUSTER_NODE out=$CLUSTER_OUT port=22400
nodes=$(for ip in $CLUSTER_IPS; do printf '%s:%s,' "$ip" "$port"; done)
[ -z "${HISTORY_FAULT:-}" ] || "$CLUSTER_TOOLS/fault.sh" $HISTORY_FAULT || exit 1
# Single-threaded TCG: see tools/rxe-vm/java-in-vm.sh (AVX, C1 only).
export JAVA_TOOL_OPTIONS="-XX:UseAVX=0 -XX:TieredStopAtLevel=1"
# shellcheck disable=SC2086
java -cp "$(cat "$ROOT/build/main-classpath.txt")" -Djava.library.path="$ROOT/target/release" \
	io.ibdxnet.app.cluster.HistoryNode --node "$me" --nodes "${nodes%,}" --transport "$transport" --fabric verbs \
	--seconds "$seconds" --incarnation "$CLUSTER_INSTANCE" --history "$out/node-$me.$CLUSTER_INSTANCE.tsv" ${HISTORY_ARGS:-}
rc=$?
# Soft-RoCE's own counters (retransmissions, sequence errors, retry exceeded):
# what the wire did to the queue pairs.
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
	[ -r "$f" ] && printf '%s\t%s\n' "${f##*/}" "$(cat "$f")"
done > "$out/node-$me.$CLUSTER_INSTANCE.rxe-counters" 2>/dev/null
exit $rc
