#!/bin/bash
# one-vm-pair.sh - the cluster's two HistoryNodes as two processes inside ONE
# Soft-RoCE VM (rxe0 on dummy0, loopback through the one kernel): the same
# history-node.sh, the same options, node I listening on ONE_VM_HOST:22400+I
# (default 127.0.0.1, as the Java tests in the VM do; the engine picks rxe0's
# ::ffff:IP GID whatever address its control plane uses). Runs in the VM:
#   RXE_VM_SHARE=DIR tools/rxe-vm/run-in-rxe-vm.sh -e ONE_VM_OUT=DIR \
#       -e HISTORY_ARGS="..." -- tools/cluster-vm/one-vm-pair.sh [TRANSPORT [SECONDS]]
# Histories node-0.0.tsv and node-1.0.tsv in ONE_VM_OUT, as a cluster's share
# holds them (bench/cluster-vs-one-vm.sh). Exit 0 if both nodes exited 0.
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
transport=${1:-ib} seconds=${2:-20}
host=${ONE_VM_HOST:-127.0.0.1}
out=${ONE_VM_OUT:?ONE_VM_OUT (a writable share) is not set}
pids=()
for i in 0 1; do
	CLUSTER_NODE=$i CLUSTER_NODES=2 CLUSTER_INSTANCE=0 CLUSTER_OUT=$out CLUSTER_TOOLS=$here \
		HISTORY_NODES="$host:22400,$host:22401" \
		"$here/history-node.sh" "$transport" "$seconds" > "$out/node-$i.out" 2> "$out/node-$i.err" &
	pids+=($!)
done
rc=0
for i in 0 1; do
	wait "${pids[$i]}"; r=$?
	echo "one-vm-pair: node $i exit $r"
	[ "$r" = 0 ] || rc=1
done
exit $rc
