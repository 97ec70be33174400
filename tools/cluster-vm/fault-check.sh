#!/bin/bash
# fault-check.sh - shows each fault.sh verb doing what it says; runs in both
# VMs of a 2-node cluster:
#   tools/cluster-vm/cluster.sh -n 2 -t 400 -- tools/cluster-vm/fault-check.sh
# Node 1 applies each fault to its NIC and pings node 0 (ping RTT and loss
# show the effect); after `down` it runs ib_send_lat against node 0 to show
# rxe0 and its GID came back. Node 0 only serves that ib_send_lat.

set -u -o pipefail
me=$CLUSTER_NODE out=$CLUSTER_OUT f=$CLUSTER_TOOLS/fault.sh
srv=${CLUSTER_IPS%% *}
log() { echo "fault-check[node$me] $(cut -d' ' -f1 /proc/uptime): $*"; }
ping() { if type -P ping >/dev/null; then command ping "$@"; else /bin/busybox ping "$@"; fi; }
fail=0
check() { "$@" || { log "FAILED: $*"; fail=1; }; }

if [ "$me" = 0 ]; then
	for ((t = 0; t < 1200; t++)); do [ -e "$out/lat.go" ] && break; sleep 0.5; done
	timeout 120 ib_send_lat -d rxe0 -x "$RXE_GID_INDEX" -n 200 > /tmp/lat.log 2>&1 & pid=$!
	sleep 0.5; touch "$out/lat.ready"; wait $pid; rc=$?
	log "ib_send_lat server rc=$rc"; exit $rc
fi
[ "$me" = 1 ] || exit 0

pings() { ping -c "$1" -i "$2" -W 2 -q "$srv" | tail -2 | tr '\n' ' '; echo; }
for ((t = 0; t < 240; t++)); do ping -c1 -W1 -q "$srv" >/dev/null 2>&1 && break; done
log "baseline:            $(pings 10 0.2)"
check "$f" delay 100 10
log "delay 100 ms ±10:    $(pings 10 0.2)"
check "$f" delay 50 40 reorder 25; "$f" show
log "delay 50±40 reorder: $(pings 10 0.2)"
check "$f" loss 50
log "loss 50 %:           $(pings 40 0.1)"
check "$f" clear
log "cleared:             $(pings 10 0.2)"
"$f" partition 4 & ppid=$!
sleep 1
log "during partition:    $(pings 5 0.2)"
wait $ppid || { log "FAILED: partition"; fail=1; }
log "after partition:     $(pings 5 0.2)"
check "$f" down 2
log "after down 2 s:      $(pings 5 0.2)"
touch "$out/lat.go"
for ((t = 0; t < 240; t++)); do [ -e "$out/lat.ready" ] && break; sleep 0.5; done
sleep 1
timeout 120 ib_send_lat -d rxe0 -x "$RXE_GID_INDEX" -n 200 "$srv" > /tmp/lat.log 2>&1; rc=$?
grep -E '^ *#bytes|^ 2 ' /tmp/lat.log
log "ib_send_lat after link down/up: client rc=$rc"
[ $rc = 0 ] || { cat /tmp/lat.log; fail=1; }
log "done, fail=$fail"
exit $fail
