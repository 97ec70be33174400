#!/bin/bash
# Runs inside the Soft-RoCE VM (see tools/rxe-vm): ib_send_lat and the DXNet
# request/response workload over the IB transport on verbs, on the same rxe0
# with the same payload size, one after the other; prints one JSON line per
# tool and the ratio of the medians (the paper's §9.1 latency baseline).
#
#   tools/rxe-vm/run-in-rxe-vm.sh bench/rxe-latency.sh [SIZE] [ROUND_TRIPS]
set -u
size=${1:-64}
n=${2:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
dev=${RXE_DEV:-rxe0}
ib_send_lat -d "$dev" -x 1 -s "$size" -n "$n" -F > /tmp/lat-server.log 2>&1 &
spid=$!
sleep 1
perf=$(timeout 120 ib_send_lat -d "$dev" -x 1 -s "$size" -n "$n" -F 127.0.0.1 2>&1)
wait $spid
echo "$perf" | sed 's/^/# /'
# Row: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9% (µs, one way = RTT/2)
row=$(echo "$perf" | awk -v s="$size" '$1 == s && NF >= 6 {print; exit}')
typical=$(echo "$row" | awk '{print $5}')
[ -n "$typical" ] || { echo "ib_send_lat produced no result" >&2; exit 1; }
perf_rtt=$(awk -v t="$typical" 'BEGIN {printf "%.2f", 2 * t}')
echo "{\"tool\":\"ib_send_lat\",\"device\":\"$dev\",\"size\":$size,\"rtt_p50_us\":$perf_rtt}"
# See tools/rxe-vm/java-in-vm.sh: no AVX in JIT code under TCG.
line=$(java -XX:UseAVX=0 -cp "$(cat "$root/build/bench-classpath.txt")" -Djava.library.path="$root/target/release" \
	io.ibdxnet.bench.Workload --transport ib --fabric verbs --pattern rtt --size "$size" --messages "$n" 2>&1 |
	grep '^RESULT ') || { echo "the DXNet workload failed" >&2; exit 1; }
echo "# $line"
ours=$(echo "$line" | sed 's/.*rtt_p50_us=\([0-9.]*\).*/\1/')
echo "{\"tool\":\"dxnet-ib-verbs\",\"device\":\"$dev\",\"size\":$size,\"rtt_p50_us\":$ours}"
awk -v a="$ours" -v b="$perf_rtt" -v s="$size" \
	'BEGIN {printf "{\"comparison\":\"DXNet RTT / ib_send_lat RTT (p50)\",\"size\":%d,\"ratio\":%.2f}\n", s, a / b}'
