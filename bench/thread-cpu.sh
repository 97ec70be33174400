#!/bin/bash
# Per-thread CPU of one Workload run over ib (sim), 64 B, 1 sender, 1 handler:
#   WINDOW=SECONDS bench/thread-cpu.sh PATTERN MESSAGES [WORKLOAD OPTIONS...]
# Samples /proc/PID/task/*/stat 3 s after the start and WINDOW s later; prints
# the run's RESULT figures and, per thread name (the kernel keeps 15 bytes:
# both nodes' engine threads share a name), percent of a core in the window.
cd "$(dirname "$0")/.."
CP=$(cat build/bench-classpath.txt)
tmp=$(mktemp -d)
out=$tmp/out
pat=$1; msgs=$2; shift 2
java -Xms1g -Xmx1g -cp "$CP" -Djava.library.path=target/release io.ibdxnet.bench.Workload --transport ib --pattern $pat --nodes 2 --size 64 --messages $msgs --threads 1 --handlers 1 "$@" > "$out" 2>/dev/null &
jpid=$!
sleep 3  # past start-up and connection
snap() { for t in /proc/$jpid/task/*; do n=$(cat $t/comm 2>/dev/null); s=$(awk '{print $14+$15}' $t/stat 2>/dev/null); [ -n "$s" ] && echo "$n $s"; done; }
snap > "$tmp/1"; t1=$(date +%s.%N)
sleep ${WINDOW:-3}
snap > "$tmp/2"; t2=$(date +%s.%N)
wait $jpid
grep RESULT "$out" | tr ' ' '\n' | grep -E "msg_per_s|cpu_ns|rtt_p50"
# By name: clock ticks (getconf CLK_TCK a second) over the window -> percent of a core.
awk -v dt="$(awk -v a="$t1" -v b="$t2" 'BEGIN {print b - a}')" -v hz="$(getconf CLK_TCK)" 'NR==FNR {a[$1]+=$2; next} {b[$1]+=$2} END {for (k in b) {d=b[k]-a[k]; if (d>0) printf "%-18s %6.1f %%\n", k, 100 * d / hz / dt}}' "$tmp/1" "$tmp/2" | sort -k2 -nr | head -14
rm -rf "$tmp"
