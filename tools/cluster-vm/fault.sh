#!/bin/bash
# fault.sh - network faults on this VM's NIC, run inside a cluster VM (by a
# node's command). netem shapes what this node SENDS (egress only): to hurt
# both directions of a pair, run it on both nodes.
#
#   fault.sh loss PCT                      drop PCT % of outgoing frames
#   fault.sh delay MS JITTER_MS [reorder PCT]
#                                          delay (normal-ish jitter); with
#                                          reorder, PCT % go out at once
#   fault.sh netem ARGS...                 any netem options (tc-netem(8))
#   fault.sh clear                         remove the qdisc
#   fault.sh down SECONDS                  link down, then up; waits until rxe0
#                                          is ACTIVE again with its IPv4 GID
#   fault.sh partition SECONDS             100 % loss for SECONDS, then clear:
#                                          the link and GIDs stay up
#   fault.sh show                          print the qdisc
# The NIC is RXE_NETDEV (set by run-in-rxe-vm.sh) or -i DEV first.

set -u -o pipefail
dev=${RXE_NETDEV:-}
[ "${1:-}" = -i ] && { dev=$2; shift 2; }
[ -n "$dev" ] && [ "$dev" != dummy0 ] || { echo "fault.sh: no NIC (RXE_NETDEV unset or dummy0)" >&2; exit 2; }
num() { [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "fault.sh: not a number: $1" >&2; exit 2; }; }
say() { echo "fault.sh[$(hostname)] $(cut -d' ' -f1 /proc/uptime): $*" >&2; }
# FAULT_STAMPS=FILE: the moments a timed fault took and left effect, as lines
# "NAME<TAB>epoch ms<TAB>uptime U" (history-node.sh passes its .faults file):
# the window in between is the fault's own, without the commands' start-up.
stamp() { [ -z "${FAULT_STAMPS:-}" ] || echo "$1	$(date +%s%3N)	uptime $(cut -d' ' -f1 /proc/uptime)" >> "$FAULT_STAMPS"; }

# Wait for rxe0 to be ACTIVE with the ::ffff:RXE_IP GID again (after link up
# the core re-adds the GIDs asynchronously).
wait_rxe() {
	local i g v want
	want=$(IFS=.; set -- $RXE_IP; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4")
	for i in $(seq 200); do
		if grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null; then
			for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
				v=""; read -r v < "$g" 2>/dev/null
				[ "$v" = "$want" ] && { say "rxe0 ACTIVE, IPv4 GID at index ${g##*/}"; return 0; }
			done
		fi
		sleep 0.1
	done
	say "rxe0 not ACTIVE with $want 20 s after link up"; return 1
}

case "${1:-}" in
loss) num "${2:?PCT}"; say "loss $2%"; tc qdisc replace dev "$dev" root netem loss "$2%" ;;
delay)
	num "${2:?MS}"; num "${3:?JITTER_MS}"
	args=(delay "${2}ms" "${3}ms")
	if [ "${4:-}" = reorder ]; then num "${5:?PCT}"; args+=(reorder "$5%"); fi
	say "${args[*]}"; tc qdisc replace dev "$dev" root netem "${args[@]}" ;;
netem) shift; say "netem $*"; tc qdisc replace dev "$dev" root netem "$@" ;;
clear) say clear; tc qdisc del dev "$dev" root 2>/dev/null; exit 0 ;;
down)
	num "${2:?SECONDS}"; say "link down for $2 s"
	ip link set "$dev" down && stamp in-effect && sleep "$2" && stamp lifting && ip link set "$dev" up && say "link up" && wait_rxe ;;
partition)
	num "${2:?SECONDS}"; say "partition (100% loss) for $2 s"
	tc qdisc replace dev "$dev" root netem loss 100% && stamp in-effect && sleep "$2"
	stamp lifting; tc qdisc del dev "$dev" root; say "partition over" ;;
show) tc qdisc show dev "$dev" ;;
*) sed -n '2,18p' "$0" >&2; exit 2 ;;
esac
