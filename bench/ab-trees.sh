#!/usr/bin/env bash
# An A/B of two built trees on one Workload: this tree (new) and BASE (another
# checkout, e.g. a git worktree of the commit before), run alternately, the
# order reversed every other round, so both see the same host over the run.
#
#   bench/ab-trees.sh BASE ROUNDS WORKLOAD_ARGS... > bench/results/DATE-NAME.txt
#
# Each tree needs target/release and build/bench-classpath.txt (gradle
# benchClasspathFile jar). JVM options: JVM_OPTS (default -Xms1g -Xmx1g).
# Prints per run the RESULT fields that compare (rate, CPU per message, RTT
# percentiles, peak RSS) and the load average when the run started.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 3 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
base=$(cd "$1" && pwd)
rounds=$2
shift 2
read -r -a jvm_opts <<<"${JVM_OPTS:--Xms1g -Xmx1g}"
echo "# bench/ab-trees.sh $base $rounds $*, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# machine: $(nproc) cores, $(java -version 2>&1 | head -1), JVM options: ${jvm_opts[*]}"
echo "# new:  $ROOT at $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || echo ' (with uncommitted changes)')"
echo "# base: $base at $(git -C "$base" rev-parse --short HEAD)"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # NAME TREE
	local line load
	load=$(cut -d' ' -f1 /proc/loadavg)
	line=$(cd "$2" && java "${jvm_opts[@]}" -cp "$(cat build/bench-classpath.txt)" -Djava.library.path=target/release \
		io.ibdxnet.bench.Workload "${@:3}" 2>/dev/null | grep '^RESULT ') || line="FAILED"
	printf '%-5s (load at start %5s) %s\n' "$1" "$load" \
		"$(echo "$line" | tr ' ' '\n' | grep -E '^(FAILED|seconds|msg_per_s|mb_per_s|cpu_ns_per_msg|rtt_p50_us|rtt_p99_us|peak_rss_mb)' | paste -sd' ')"
}
for r in $(seq 1 "$rounds"); do
	echo "## round $r"
	if [ $((r % 2)) = 1 ]; then
		run new "$ROOT" "$@"
		run base "$base" "$@"
	else
		run base "$base" "$@"
		run new "$ROOT" "$@"
	fi
done
