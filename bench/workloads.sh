#!/usr/bin/env bash
# End-to-end workload suite (paper §9.1–§9.2): DXNet over ib (sim), nio and
# loopback, and a plain Netty baseline, all on this machine in one run.
#
#   bench/workloads.sh [--quick] [OUTPUT_PREFIX]
#   bench/workloads.sh --plot OUTPUT_PREFIX     (only redraw the plots of OUTPUT_PREFIX.csv)
#
# Writes OUTPUT_PREFIX.csv (one row per run, with the machine and the command
# in '#' comment lines) and OUTPUT_PREFIX-*.png (gnuplot). Needs the bench
# classpath (gradle benchClasspathFile) and gnuplot; ./ibdxnet bench workloads
# prepares both.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=0
plot_only=0
if [ "${1:-}" = --quick ]; then
	quick=1
	shift
elif [ "${1:-}" = --plot ]; then
	plot_only=1
	shift
fi
out=${1:-$ROOT/bench/results/$(date +%Y-%m-%d)-workloads}
csv=$out.csv
failures=0
if [ $plot_only = 0 ]; then
CP=$(cat "$ROOT/build/bench-classpath.txt")
JAVA=(java -Xms1g -Xmx1g -cp "$CP" -Djava.library.path="$ROOT/target/release")

{
	echo "# ibdxnet workload suite, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "# command: bench/workloads.sh $([ $quick = 1 ] && echo --quick) $*"
	echo "# machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(uname -r), $(java -version 2>&1 | head -1)"
	echo "impl,pattern,nodes,size,senders,handlers,messages,seconds,msg_per_s,mb_per_s,cpu_ns_per_msg,rtt_avg_us,rtt_p50_us,rtt_p95_us,rtt_p99_us,rtt_p999_us"
} >"$csv"

# Per-thread message counts: about 128 MiB per run for throughput, 64 MiB of
# round trips, within bounds (quick: tiny).
count() { # size kind
	local size=$1 kind=$2 n
	if [ $quick = 1 ]; then
		[ "$kind" = rtt ] && echo 200 || echo 2000
		return
	fi
	if [ "$kind" = rtt ]; then
		n=$(((64 << 20) / (size + 1)))
		[ $n -gt 20000 ] && n=20000
		[ $n -lt 200 ] && n=200
	else
		n=$(((128 << 20) / (size + 1)))
		[ $n -gt 1000000 ] && n=1000000
		[ $n -lt 100 ] && n=100
	fi
	echo $n
}

run() { # impl pattern size senders handlers nodes
	local impl=$1 pattern=$2 size=$3 senders=$4 handlers=$5 nodes=$6 main=io.ibdxnet.bench.Workload line
	local kind=stream messages
	# The same total per run whatever the number of sending threads and nodes.
	messages=$(($(count "$size" $kind) / senders))
	[ "$pattern" = rtt ] && kind=rtt && messages=$(count "$size" rtt)
	[ "$pattern" = bi ] && messages=$((messages / 2))
	[ "$pattern" = all ] && messages=$((messages / nodes))
	[ "$impl" = netty ] && main=io.ibdxnet.bench.NettyBaseline
	printf '%-8s %-4s nodes=%d size=%-8d senders=%d handlers=%d ... ' "$impl" "$pattern" "$nodes" "$size" "$senders" "$handlers" >&2
	line=$("${JAVA[@]}" "$main" --transport "$impl" --pattern "$pattern" --nodes "$nodes" --size "$size" \
		--messages "$messages" --threads "$senders" --handlers "$handlers" 2>/dev/null | grep '^RESULT ') || {
		echo "FAILED" >&2
		failures=$((failures + 1))
		return 0
	}
	echo "$line" | sed 's/^RESULT //; s/ /\n/g' | sed 's/^[a-z0-9_]*=//' | paste -sd, >>"$csv"
	echo "$line" | sed 's/.*msg_per_s=\([0-9]*\).*rtt_p50_us=\([^ ]*\).*/\1 msg\/s, p50 \2 µs/' >&2
}

if [ $quick = 1 ]; then
	for impl in ib nio loopback netty; do
		run $impl uni 64 1 1 2
		run $impl rtt 64 1 1 2
	done
	run ib all 1024 1 1 3
else
	# Message rate / throughput and RTT versus size, every implementation.
	for impl in ib nio loopback netty; do
		for ((s = 1; s <= 1 << 20; s *= 2)); do
			run $impl uni $s 1 1 2
		done
		for ((s = 1; s <= 1 << 20; s *= 4)); do
			run $impl rtt $s 1 1 2
		done
	done
	# Sender and handler threads (64-byte messages), both directions, all-to-all.
	for impl in ib nio; do
		for t in 1 2 4 8; do
			for h in 1 2 4; do
				run $impl uni 64 $t $h 2
			done
		done
		for s in 64 16384; do
			run $impl bi $s 1 1 2
			run $impl all $s 1 1 3
			run $impl all $s 1 1 4
		done
	done
fi

fi

# Plots: message rate and throughput versus size (uni, 1 sender), RTT
# percentiles versus size.
command -v gnuplot >/dev/null || { echo "gnuplot missing: no plots" >&2; exit $((failures > 0)); }
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
for impl in ib nio loopback netty; do
	# One point per size (the thread sweep repeats 64 B with 1 sender), in size order.
	grep -v '^#' "$csv" | awk -F, -v i=$impl '$1 == i && $2 == "uni" && $5 == 1 && $6 == 1 && !seen[$4]++ {print $4, $9, $10}' |
		sort -n >"$data/$impl-uni"
	grep -v '^#' "$csv" | awk -F, -v i=$impl '$1 == i && $2 == "rtt" && !seen[$4]++ {print $4, $13, $14, $15, $16}' |
		sort -n >"$data/$impl-rtt"
done
gnuplot <<EOF
set terminal png size 900,560
set logscale x 2
set xtics ("1" 1, "16" 16, "256" 256, "4K" 4096, "64K" 65536, "1M" 1048576)
set xlabel "message size (bytes)"
set key top left
set grid
set output "$out-rate.png"
set ylabel "messages/s"
set logscale y
set title "message rate, 1 sender thread, 2 nodes in one JVM"
plot for [i in "ib nio loopback netty"] "$data/".i."-uni" using 1:2 with linespoints title i
set output "$out-throughput.png"
set ylabel "MB/s payload"
set title "throughput, 1 sender thread"
set key bottom right
plot for [i in "ib nio loopback netty"] "$data/".i."-uni" using 1:3 with linespoints title i
set output "$out-rtt.png"
set ylabel "round trip time (µs)"
set title "request/response RTT: p50 (filled points), p99 (open circles), same colour per transport"
set key top left
impls = "ib nio loopback netty"
plot for [k=1:4] "$data/".word(impls, k)."-rtt" using 1:2 with linespoints lc k pt 7 title word(impls, k)." p50", \
     for [k=1:4] "$data/".word(impls, k)."-rtt" using 1:4 with linespoints lc k pt 6 dashtype 2 title word(impls, k)." p99"
EOF
echo "results: $csv, plots: $out-{rate,throughput,rtt}.png" >&2
if [ $failures -gt 0 ]; then
	echo "$failures workload runs failed" >&2
	exit 1
fi
