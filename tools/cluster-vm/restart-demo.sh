#!/bin/bash
# restart-demo.sh - the crash-and-restart pattern of lib.sh, end to end:
# 2 nodes boot; node 1 is powered off (qemu SIGKILL) and started again with
# the same node number; node 0 sees it vanish (ping) and come back, then an
# ib_send_lat runs between node 0 and the NEW instance of node 1.
#
# Usage: restart-demo.sh [OUTDIR]        (host side; exit 0 if all went well)
# Internal: restart-demo.sh --in-vm       (what each VM runs)

set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ "${1:-}" = --in-vm ]; then
	out=$CLUSTER_OUT me=$CLUSTER_NODE
	log() { echo "restart-demo[node$me.$CLUSTER_INSTANCE] $(cut -d' ' -f1 /proc/uptime): $*"; }
	ping() { if type -P ping >/dev/null; then command ping "$@"; else /bin/busybox ping "$@"; fi; }
	peer=192.0.2.11
	if [ "$me" = 1 ] && [ "$CLUSTER_INSTANCE" = 0 ]; then
		log "up, waiting to be killed"; touch "$out/node1-up.0"; sleep 600; exit 1
	elif [ "$me" = 1 ]; then
		log "restarted"
		for ((t = 0; t < 600; t++)); do [ -e "$out/lat.ready" ] && break; sleep 0.5; done
		sleep 1
		timeout 120 ib_send_lat -d rxe0 -x "$RXE_GID_INDEX" -n 200 192.0.2.10; rc=$?
		log "ib_send_lat client rc=$rc"; exit $rc
	fi
	for ((t = 0; t < 600; t++)); do ping -c1 -W1 -q $peer >/dev/null 2>&1 && break; done
	log "node 1 answers"
	for ((t = 0; t < 600; t++)); do ping -c1 -W1 -q $peer >/dev/null 2>&1 || break; sleep 0.5; done
	log "node 1 is gone"
	for ((t = 0; t < 600; t++)); do ping -c1 -W1 -q $peer >/dev/null 2>&1 && break; done
	log "node 1 answers again"
	timeout 120 ib_send_lat -d rxe0 -x "$RXE_GID_INDEX" -n 200 & pid=$!
	sleep 0.5; touch "$out/lat.ready"
	wait $pid; rc=$?
	log "ib_send_lat server rc=$rc"; exit $rc
fi

. "$here/lib.sh"
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/restart-demo.XXXXXX")}
cluster_init "$out" 2 1500 300 -- "$here/restart-demo.sh" --in-vm || exit 2
trap cluster_stop_all EXIT
cluster_start_node 0
cluster_start_node 1
for ((t = 0; t < 600; t++)); do [ -e "$CLUSTER_DIR/share/node1-up.0" ] && break; sleep 0.5; done
sleep 3
echo "restart-demo: crashing node 1 at $(date +%T)"
cluster_kill_node 1
echo "restart-demo: node 1 instance 0 ended with $(cat "$CLUSTER_DIR/node-1.rc"); starting it again"
cluster_start_node 1
cluster_wait_all 500
trap - EXIT
cluster_stop_all
cluster_table
