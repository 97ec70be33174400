#!/usr/bin/env bash
# End-to-end workload suite (paper §9.1–§9.2): DXNet over ib (sim), nio and
# loopback, a plain Netty baseline and Aeron's ping-pong (64 B RTT, UDP and
# IPC, embedded driver), all on this machine in one run; RTT
# and rate with the engine's idle setting at three values; nio with the
# receiver in a process of its own; and the idle cost of connected nodes.
# --scale instead: all-to-all against the node count (issue 22): ib with
# 2-64 nodes in one JVM (engine threads dedicated, then shared), nio with
# 2-8 processes of one node each.
#
#   bench/workloads.sh [--quick] [OUTPUT_PREFIX]
#   bench/workloads.sh --scale [OUTPUT_PREFIX]  (OUTPUT_PREFIX-scale.csv, -scale-rate.png, -scale-memory.png)
#   bench/workloads.sh --plot OUTPUT_PREFIX     (only redraw the plots of OUTPUT_PREFIX.csv and -scale.csv)
#
# Writes OUTPUT_PREFIX.csv (one row per run, with the machine and the command
# in '#' comment lines), OUTPUT_PREFIX-idle.csv (CPU of two connected nodes
# without traffic, per transport) and OUTPUT_PREFIX-*.png (gnuplot). Needs
# the bench classpath (gradle benchClasspathFile) and gnuplot; ./ibdxnet bench
# workloads prepares both.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=0
plot_only=0
scale=0
if [ "${1:-}" = --quick ]; then
	quick=1
	shift
elif [ "${1:-}" = --scale ]; then
	scale=1
	shift
elif [ "${1:-}" = --plot ]; then
	plot_only=1
	shift
fi
out=${1:-$ROOT/bench/results/$(date +%Y-%m-%d)-workloads}
csv=$out.csv
idle_csv=$out-idle.csv
scale_csv=$out-scale.csv
[ $scale = 1 ] && csv=$scale_csv && idle_csv=$out-scale-idle.csv
failures=0
# The engine settings (native key=value pairs) of every DXNet row that names
# none: the engine's defaults (yield at once, block after 1 ms idle).
NATIVE_STD=""
# The engine's idle behaviour at three values, name=settings ('' = the
# engine's defaults): block on events at once, the defaults (yield, then
# block after parking_sleep_after_us = 1 ms), and the paper's pure polling
# (never block; yield and park only after a day, the largest value).
IDLE_MODES=(
	"sleep=parking_sleep_after_us=0"
	"default="
	"poll=parking_yield_after_ms=86400000 parking_park_after_ms=86400000 parking_sleep_after_us=never"
)
if [ $plot_only = 0 ]; then
CP=$(cat "$ROOT/build/bench-classpath.txt")
# The heap of every JVM of a row (--processes: the children get the same
# options); the scale rows size it per row.
heap=(-Xms1g -Xmx1g)

{
	echo "# ibdxnet workload suite, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "# command: bench/workloads.sh $([ $quick = 1 ] && echo --quick)$([ $scale = 1 ] && echo --scale) $*"
	echo "# machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(uname -r), $(java -version 2>&1 | head -1)"
	echo "# git: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || echo ' (with uncommitted changes)'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "impl,pattern,nodes,size,senders,handlers,messages,seconds,msg_per_s,mb_per_s,cpu_ns_per_msg,rtt_avg_us,rtt_p50_us,rtt_p95_us,rtt_p99_us,rtt_p999_us,processes,native,mesh_ms,peak_rss_mb,bytes_per_connection,heap_committed_mb,gap_us,fanout,active"
} >"$csv"
{
	grep '^#' "$csv"
	echo "impl,native,seconds,cpu_ms,cpu_pct_core,process_cpu_ms,threads,rss_started_mb,rss_connected_mb,endpoints,rss_bytes_per_endpoint"
} >"$idle_csv"

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

# The settings and options of a row as the progress lines show them.
shown() { # NATIVE IMPL [OPTIONS...]
	local native=$1 impl=$2
	shift 2
	if [ -n "$native" ]; then
		printf '%s ' "$native"
	elif [ "$impl" = ib ]; then
		printf '(engine defaults) '
	fi
	[ $# -gt 0 ] && printf '%s ' "$*"
	return 0
}

# run IMPL PATTERN SIZE SENDERS HANDLERS NODES [NATIVE [WORKLOAD OPTIONS...]]
# NATIVE: engine settings, key=value separated by spaces ($NATIVE_STD when not
# given, '' for the engine's defaults). cpu_ns_per_msg is the CPU time of all
# threads of every process of the run per message (per round trip for rtt);
# peak_rss_mb the peak resident sets (VmHWM, MiB) of those processes, summed;
# bytes_per_connection the memory of one connection endpoint (ib: the
# engine's registered send ring; nio, loopback: the outgoing rings' resident
# bytes per open connection, see Workload.bytesPerConnection);
# heap_committed_mb the Java heap committed at the end, summed likewise.
run() {
	local impl=$1 pattern=$2 size=$3 senders=$4 handlers=$5 nodes=$6 native=${7-$NATIVE_STD} main=io.ibdxnet.bench.Workload line kv
	local kind=stream messages opts=() jvm=()
	shift $(($# < 7 ? $# : 7))
	# The same total per run whatever the number of sending threads and nodes.
	messages=$(($(count "$size" $kind) / senders))
	[ "$pattern" = rtt ] && kind=rtt && messages=$(count "$size" rtt)
	[ "$pattern" = bi ] && messages=$((messages / 2))
	[ "$pattern" = all ] && messages=$((messages / nodes))
	if [ "$impl" = netty ]; then
		main=io.ibdxnet.bench.NettyBaseline
		native=
	elif [ "${impl%-*}" = aeron ]; then
		# aeron-udp, aeron-ipc; its driver and idle settings go to the native column.
		# Agrona 2 uses jdk.internal.misc.Unsafe: exported for these rows only.
		main=io.ibdxnet.bench.AeronPingPong
		native=
		jvm=(--add-exports java.base/jdk.internal.misc=ALL-UNNAMED)
	else
		for kv in $native; do opts+=(--native "$kv"); done
	fi
	printf '%-8s %-4s nodes=%d size=%-8d senders=%d handlers=%d %s... ' "$impl" "$pattern" "$nodes" "$size" "$senders" "$handlers" \
		"$(shown "$native" "$impl" "$@")" >&2
	[ $scale = 1 ] && echo "# load average before the next row: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$csv"
	line=$(java "${heap[@]}" "${jvm[@]}" -cp "$CP" -Djava.library.path="$ROOT/target/release" "$main" --transport "$impl" --pattern "$pattern" --nodes "$nodes" --size "$size" \
		--messages "$messages" --threads "$senders" --handlers "$handlers" "${opts[@]}" "$@" 2>/dev/null | grep '^RESULT ') || {
		echo "FAILED" >&2
		failures=$((failures + 1))
		return 0
	}
	echo "$line" | sed 's/^RESULT //; s/ /\n/g' | sed 's/^[a-z0-9_]*=//' | paste -sd, >>"$csv"
	echo "$line" | sed 's/.*msg_per_s=\([0-9]*\).*cpu_ns_per_msg=\([0-9]*\).*rtt_p50_us=\([^ ]*\).*mesh_ms=\([^ ]*\) peak_rss_mb=\([^ ]*\).*/\1 msg\/s, \2 ns CPU\/msg, p50 \3 µs, mesh \4 ms, peak RSS \5 MiB/' >&2
}

# idle IMPL [NATIVE [NODES]]: CPU of a JVM with NODES (2) connected nodes and
# no traffic (IMPL none: a JVM without nodes), over $idle_seconds after a 2 s
# settle; its resident set before and after connecting, per endpoint.
idle() {
	local impl=$1 native=${2-$NATIVE_STD} nodes=${3:-2} line kv opts=()
	for kv in $native; do opts+=(--native "$kv"); done
	printf '%-8s idle nodes=%d %ss %s... ' "$impl" "$nodes" "$idle_seconds" "$(shown "$native" "$impl")" >&2
	line=$(java "${heap[@]}" -cp "$CP" -Djava.library.path="$ROOT/target/release" io.ibdxnet.bench.Workload --transport "$impl" --pattern idle --seconds "$idle_seconds" \
		--nodes "$nodes" "${opts[@]}" 2>/dev/null | grep '^IDLE ') || {
		echo "FAILED" >&2
		failures=$((failures + 1))
		return 0
	}
	echo "$line" | sed 's/^IDLE //; s/ /\n/g' | sed 's/^[a-z0-9_]*=//' | paste -sd, >>"$idle_csv"
	echo "$line" | sed 's/.*cpu_pct_core=\([^ ]*\) .*threads=\([^; ]*\).*rss_bytes_per_endpoint=\([^ ]*\).*/\1 % of a core, busiest: \2, resident per endpoint: \3 bytes/' >&2
}

# The idle rows and the 64-byte RTT and rate rows over ib at each idle mode
# of the engine. Threads that spin instead of yielding make a round trip
# wait for the scheduler's time slices on two cores (milliseconds), so the
# RTT rows here have at most 2000 round trips.
idle_modes() { # PATTERN...
	local mode p more
	for mode in "${IDLE_MODES[@]}"; do
		for p in "$@"; do
			more=()
			[ "$p" = rtt ] && [ $quick = 0 ] && more=(--messages 2000)
			if [ "$p" = idle ]; then
				idle ib "${mode#*=}"
			else
				run ib "$p" 64 1 1 2 "${mode#*=}" "${more[@]}"
			fi
		done
	done
}

# All-to-all, 64 B, one sender and one handler thread per node, against the
# node count (issue 22; the shape of the paper's Figure 14, 2-8 nodes).
# Messages per node: the same total per row, about 10-20 s per row on the
# 2-core host (ib 0.6-1.6 M msg/s, nio 0.4-0.8 M, measured 2026-11-26 on
# the loaded host); the heap grows with the nodes of the JVM.
scale_messages() { # IMPL NODES
	[ "$1" = ib ] && echo $((15000000 / $2)) || echo $((8000000 / $2))
}
if [ $scale = 1 ]; then
	for threads in "" "engine_threads=shared"; do
		for n in 2 4 8 16 32 64; do
			heap=(-Xms256m "-Xmx$((1024 + n * 32))m")
			run ib all 64 1 1 $n "$threads" --messages "$(scale_messages ib $n)"
		done
	done
	heap=(-Xms256m -Xmx512m)
	for n in 2 3 4 5 6 7 8; do
		run nio all 64 1 1 $n "" --processes $n --messages "$(scale_messages nio $n)"
	done
	echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$csv"
	# Idle connected nodes in one JVM: what an idle endpoint keeps resident.
	idle_seconds=2
	for n in 2 16 64; do
		heap=(-Xms256m "-Xmx$((1024 + n * 32))m")
		idle ib "" $n
	done
	heap=(-Xms256m -Xmx512m)
	for n in 2 8; do
		idle nio "" $n
	done
elif [ $quick = 1 ]; then
	idle_seconds=1
	for impl in ib nio loopback netty; do
		run $impl uni 64 1 1 2
		run $impl rtt 64 1 1 2
	done
	for impl in aeron-udp aeron-ipc; do
		run $impl rtt 64 1 1 2
	done
	run ib all 1024 1 1 3
	heap=(-Xms256m -Xmx512m)
	run nio all 64 1 1 3 "" --processes 3
	heap=(-Xms1g -Xmx1g)
	idle_modes rtt
	run nio uni 64 1 1 2 "$NATIVE_STD" --processes 2
	run nio rtt 64 1 1 2 "$NATIVE_STD" --processes 2
	run ib rtt 64 1 1 2 "$NATIVE_STD" --receiveInline false
	# Where a round trip's time goes (bench/rtt-hops.sh): the tool runs and every round trip passed its eight points.
	printf 'ib       rtt-trace 200 round trips... ' >&2
	if java "${heap[@]}" -cp "$CP" -Djava.library.path="$ROOT/target/release" io.ibdxnet.bench.RttTrace --messages 200 2>/dev/null | grep -q '^0>7 round trip'; then
		echo ok >&2
	else
		echo FAILED >&2
		failures=$((failures + 1))
	fi
	idle ib
	idle nio ""
	idle loopback ""
else
	idle_seconds=10
	# Message rate / throughput and RTT versus size, every implementation.
	for impl in ib nio loopback netty; do
		for ((s = 1; s <= 1 << 20; s *= 2)); do
			run $impl uni $s 1 1 2
		done
		for ((s = 1; s <= 1 << 20; s *= 4)); do
			run $impl rtt $s 1 1 2
		done
	done
	# Aeron's embedded ping-pong beside the 64 B rtt rows (issue 31): UDP over
	# localhost and IPC, the same round trips as netty's.
	for impl in aeron-udp aeron-ipc; do
		run $impl rtt 64 1 1 2
	done
	# The same over nio with the receiving node in a process of its own.
	for ((s = 1; s <= 1 << 20; s *= 2)); do
		run nio uni $s 1 1 2 "$NATIVE_STD" --processes 2
	done
	for ((s = 1; s <= 1 << 20; s *= 4)); do
		run nio rtt $s 1 1 2 "$NATIVE_STD" --processes 2
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
	# The engine's idle behaviour: RTT, rate and idle cost per mode; idle cost
	# of the other transports and of a JVM without nodes.
	idle_modes rtt uni idle
	# Every buffer through the coordinator thread (receiveInline false): one
	# thread hand-off more per direction, as before 2026-11-25.
	for impl in ib nio loopback; do
		run $impl rtt 64 1 1 2 "$NATIVE_STD" --receiveInline false
		run $impl uni 64 1 1 2 "$NATIVE_STD" --receiveInline false
	done
	run nio rtt 64 1 1 2 "$NATIVE_STD" --processes 2 --receiveInline false
	idle nio ""
	idle loopback ""
	idle none ""
fi
fi

# Plots: message rate and throughput versus size (uni, 1 sender), RTT
# percentiles versus size; the rows with the standard engine settings (older
# CSVs have neither processes nor native), nio in two processes as its own
# line where the CSV has it.
command -v gnuplot >/dev/null || { echo "gnuplot missing: no plots" >&2; exit $((failures > 0)); }
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

# The scale plots (OUTPUT_PREFIX-scale.csv): aggregate rate and peak RSS of
# the all-to-all rows against the node count; ib in one JVM with dedicated
# and with shared engine threads, nio with a process per node; beside the
# rate, the paper's Figure 14 (64 B, 2-8 nodes on real InfiniBand, its own
# axis: only the shape compares).
plot_scale() {
	local series=
	grep -v '^#' "$scale_csv" | awk -F, '$1 == "ib" && $2 == "all" && $17 == 1 && ($18 == "-" || $18 == "engine_threads=dedicated") {print $3, $9 / 1e6, $20, $19, ($22 == "" ? "NaN" : $22)}' | sort -n >"$data/ib-dedicated"
	grep -v '^#' "$scale_csv" | awk -F, '$1 == "ib" && $2 == "all" && $17 == 1 && $18 == "engine_threads=shared" {print $3, $9 / 1e6, $20, $19, ($22 == "" ? "NaN" : $22)}' | sort -n >"$data/ib-shared"
	grep -v '^#' "$scale_csv" | awk -F, '$1 == "nio" && $2 == "all" && $17 > 1 {print $3, $9 / 1e6, $20, $19, ($22 == "" ? "NaN" : $22)}' | sort -n >"$data/nio-processes"
	printf '2 7.0\n4 14.5\n6 20.1\n8 25.6\n' >"$data/paper-fig14"
	for f in ib-dedicated ib-shared nio-processes; do
		[ -s "$data/$f" ] && series+="$f "
	done
	gnuplot <<EOF
set terminal png size 900,600
series = "$series"
set logscale x 2
set xtics (2, 4, 8, 16, 32, 64)
set xrange [1.8:72]
set xlabel "nodes (ib: in one JVM on sim; nio: one process each)"
set grid
set key below
set output "$out-scale-rate.png"
set ylabel "aggregate messages/s (millions), this host (2 cores)"
set y2label "paper Figure 14, 64 B (millions/s, 8 machines, real InfiniBand)"
set y2tics
set yrange [0:*]
set y2range [0:*]
set title "all-to-all, 64 B, 1 sender and 1 handler thread per node"
plot for [i in "$series"] "$data/".i using 1:2 with linespoints title i, \
     "$data/paper-fig14" using 1:2 axes x1y2 with linespoints dashtype 2 lc rgb "gray40" title "paper Fig. 14 (right axis)"
set output "$out-scale-memory.png"
unset y2label
unset y2tics
set ylabel "peak RSS of all processes of the run (MiB)"
set title "all-to-all, 64 B: peak resident set (VmHWM) and Java heap, all processes of the run"
plot for [k=1:words(series)] "$data/".word(series, k) using 1:3 with linespoints lc k pt 7 title word(series, k)." peak RSS", \
     for [k=1:words(series)] "$data/".word(series, k) using 1:5 with linespoints lc k pt 6 dashtype 2 title word(series, k)." heap committed at the end", \
     4096 with lines dashtype 2 lc rgb "gray40" title "issue 22 goal at 64 nodes (4 GiB)"
EOF
	echo "results: $scale_csv$([ -s "$out-scale-idle.csv" ] && echo ", $out-scale-idle.csv"), plots: $out-scale-{rate,memory}.png" >&2
}
if [ -s "$scale_csv" ] && { [ $scale = 1 ] || [ $plot_only = 1 ]; }; then
	plot_scale
fi
if [ $scale = 1 ] || [ ! -s "$csv" ]; then
	if [ $failures -gt 0 ]; then
		echo "$failures workload runs failed" >&2
		exit 1
	fi
	exit 0
fi
uni_series=
rtt_series=
for series in ib nio loopback netty nio-2proc; do
	impl=${series%-2proc}
	procs=1
	[ "$series" != "$impl" ] && procs=2
	# One point per size (the thread sweep repeats 64 B with 1 sender), in size order.
	filter='$1 == i && ($17 == "" ? 1 : $17) == p && ($18 == "" || $18 == "-" || $18 == std)'
	grep -v '^#' "$csv" | awk -F, -v i="$impl" -v p=$procs -v std="${NATIVE_STD// /;}" \
		"$filter"' && $2 == "uni" && $5 == 1 && $6 == 1 && !seen[$4]++ {print $4, $9, $10}' | sort -n >"$data/$series-uni"
	grep -v '^#' "$csv" | awk -F, -v i="$impl" -v p=$procs -v std="${NATIVE_STD// /;}" \
		"$filter"' && $2 == "rtt" && !seen[$4]++ {print $4, $13, $14, $15, $16}' | sort -n >"$data/$series-rtt"
	[ -s "$data/$series-uni" ] && uni_series+="$series "
	[ -s "$data/$series-rtt" ] && rtt_series+="$series "
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
set title "message rate, 1 sender thread, 2 nodes in one JVM (nio-2proc: in two)"
plot for [i in "$uni_series"] "$data/".i."-uni" using 1:2 with linespoints title i
set output "$out-throughput.png"
set ylabel "MB/s payload"
set title "throughput, 1 sender thread"
set key bottom right
plot for [i in "$uni_series"] "$data/".i."-uni" using 1:3 with linespoints title i
set output "$out-rtt.png"
set ylabel "round trip time (µs)"
set title "request/response RTT: p50 (filled points), p99 (open circles), same colour per transport"
set key top left
impls = "$rtt_series"
plot for [k=1:words(impls)] "$data/".word(impls, k)."-rtt" using 1:2 with linespoints lc k pt 7 title word(impls, k)." p50", \
     for [k=1:words(impls)] "$data/".word(impls, k)."-rtt" using 1:4 with linespoints lc k pt 6 dashtype 2 title word(impls, k)." p99"
EOF
echo "results: $csv$([ -s "$idle_csv" ] && echo ", $idle_csv"), plots: $out-{rate,throughput,rtt}.png" >&2
if [ $failures -gt 0 ]; then
	echo "$failures workload runs failed" >&2
	exit 1
fi
