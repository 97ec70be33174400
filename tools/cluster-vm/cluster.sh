#!/bin/bash
# cluster.sh - boot 2..4 Soft-RoCE VMs joined by one Ethernet segment that
# exists only on this host, run one command in every VM, collect the output,
# tear everything down.
#
# Usage: cluster.sh [-n NODES] [-t SECONDS] [-o OUTDIR] [--mtu 1500|9000]
#                   [-e NAME=VALUE]... -- COMMAND [ARGS...]
#
#   -n NODES   2..4 (default 2)
#   -t SECONDS time limit of COMMAND in each VM (default 300); each VM may
#              take RXE_VM_BOOT_SLACK (90) more to boot, and whatever still
#              runs after SECONDS + slack + 30 is killed: nothing outlives that.
#   -o OUTDIR  results (default: a new /tmp/cluster-vm.XXXXXX, printed)
#   --mtu M    MTU of every NIC (RoCE path MTU follows: 1024 at 1500, 4096 at 9000)
#   -e N=V     extra environment variable for COMMAND
#
# Node I (0-based) has IP 192.0.2.(10+I)/24, MAC 52:54:00:c0:02:(10+I), host
# name nodeI, rxe0 bound to its virtio NIC, and runs COMMAND as root with
#   CLUSTER_NODE=I CLUSTER_NODES=N CLUSTER_IPS="192.0.2.10 192.0.2.11 ..."
#   CLUSTER_OUT=OUTDIR/share (read-write, shared by all VMs and the host)
#   CLUSTER_INSTANCE=K (0; K-th restart of the node)  CLUSTER_TOOLS=this folder
#   RXE_DEV=rxe0 RXE_NETDEV=<NIC> RXE_IP=<ip> RXE_GID_INDEX=<::ffff:ip GID>
# Output: OUTDIR/node-I.out, node-I.err, node-I.console (the VM's console).
# Segment: 2 nodes = a qemu dgram pair on 127.0.0.1; more = a qemu socket
# multicast group on lo (CLUSTER_NET=pair|mcast overrides).
# VMs: RXE_VM_MEM (1G), RXE_VM_SMP (1), RXE_VM_ACCEL as for run-in-rxe-vm.sh.
#
# Exit: 0 if every node's command exited 0, else 1; 2 for bad usage.
# Scenarios that crash and restart nodes use lib.sh (see README.md).

set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

n=2 t=300 out="" mtu=1500
declare -a envs=()
usage() { sed -n '4,10p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	-n) n=$2; shift 2 ;;
	-t) t=$2; shift 2 ;;
	-o) out=$2; shift 2 ;;
	--mtu) mtu=$2; shift 2 ;;
	-e) envs+=(-e "$2"); shift 2 ;;
	--) shift; break ;;
	-h|--help) sed -n '2,31p' "$0"; exit 0 ;;
	*) usage ;;
	esac
done
[ $# -ge 1 ] || usage
[[ "$n" =~ ^[2-4]$ ]] || { echo "cluster: -n must be 2..4" >&2; exit 2; }
[[ "$t" =~ ^[0-9]+$ ]] || { echo "cluster: bad -t $t" >&2; exit 2; }
[ "$mtu" = 1500 ] || [ "$mtu" = 9000 ] || { echo "cluster: --mtu must be 1500 or 9000" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/cluster-vm.XXXXXX")
mkdir -p "$out" || exit 2
if ls "$out"/node-* >/dev/null 2>&1; then echo "cluster: $out already has node files" >&2; exit 2; fi

cluster_init "$out" "$n" "$mtu" "$t" ${envs[@]+"${envs[@]}"} -- "$@" || exit 2
cluster_load
echo "cluster: $n nodes ($CLUSTER_NET, ports from $CLUSTER_PORT_BASE, MTU $mtu), output in $CLUSTER_DIR" >&2

# On any exit (Ctrl-C included) no VM may stay behind.
trap 'cluster_stop_all' EXIT
trap 'exit 130' INT TERM

t0=$SECONDS
for ((i = 0; i < n; i++)); do cluster_start_node "$i"; done
cluster_wait_all $((t + ${RXE_VM_BOOT_SLACK:-90} + 30)) ||
	echo "cluster: still running after $((SECONDS - t0)) s, killing what is left" >&2
cluster_stop_all
echo "cluster: all nodes ended after $((SECONDS - t0)) s" >&2
trap - EXIT
cluster_table && exit 0
exit 1
