#!/bin/bash
# Runs inside the Soft-RoCE VM (see tools/rxe-vm): ib_send_bw and
# ibdxnet-loopback on the same rxe0 with the same message size, one after
# the other, and prints one JSON line per tool plus the ratio.
#
#   tools/rxe-vm/run-in-rxe-vm.sh bench/rxe-compare.sh [SIZE] [SECONDS]
set -u
size=${1:-65536}
secs=${2:-5}
bin=${IBDXNET_LOOPBACK:-$(dirname "$0")/../target/release/ibdxnet-loopback}
dev=${RXE_DEV:-rxe0}
# perftest: server in the background, client over 127.0.0.1 (TCP exchange), RoCE v2 GID 1.
ib_send_bw -d "$dev" -x 1 -s "$size" -D "$secs" -F > /tmp/server.log 2>&1 &
spid=$!
sleep 1
perf=$(timeout $((secs + 60)) ib_send_bw -d "$dev" -x 1 -s "$size" -D "$secs" -F 127.0.0.1 2>&1)
wait $spid
echo "$perf" | sed 's/^/# /'
# The result row: #bytes #iterations BW_peak BW_average MsgRate (MB/sec = 2^20 B/s)
row=$(echo "$perf" | awk -v s="$size" '$1 == s && NF >= 4 {print; exit}')
bw_mib=$(echo "$row" | awk '{print $4}')
[ -n "$bw_mib" ] || { echo "ib_send_bw produced no result" >&2; exit 1; }
perf_gbps=$(awk -v m="$bw_mib" 'BEGIN {printf "%.4f", m * 1048576 / 1e9}')
echo "{\"tool\":\"ib_send_bw\",\"device\":\"$dev\",\"size\":$size,\"seconds\":$secs,\"gb_per_s\":$perf_gbps}"
# ibdxnet: one receive buffer of SIZE per WR, so WRs carry SIZE bytes like ib_send_bw's messages.
ours=$("$bin" --fabric verbs --device "$dev" --nodes 2 --one-way --duration "$secs" \
	--recv-buffer "$size" --sges 1 --srq 512 --json) || { echo "ibdxnet-loopback failed" >&2; exit 1; }
echo "$ours"
ours_gbps=$(echo "$ours" | sed 's/.*"gb_per_s":\([0-9.]*\).*/\1/')
awk -v a="$ours_gbps" -v b="$perf_gbps" -v s="$size" \
	'BEGIN {printf "{\"comparison\":\"ibdxnet-loopback / ib_send_bw\",\"size\":%d,\"ratio\":%.3f}\n", s, a / b}'
