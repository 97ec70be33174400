#!/usr/bin/env bash
# Variants of one Workload on this tree, run in interleaved rounds (the order
# reversed every other round, so all see the same host over the run): each
# variant is NAME=EXTRA_ARGS, added to the common arguments in BASE_ARGS. A
# variant may repeat the common arguments alone (NAME=) to show the spread of
# identical runs.
#
#   BASE_ARGS='--transport ib --pattern all --nodes 64 ...' \
#     bench/variants.sh ROUNDS 'default=' 'srq128=--native srq_size=128' ...
#
# A variant's extra arguments may also replace common ones (Workload takes the
# last value). JVM options: JVM_OPTS (default -Xms256m -Xmx3072m). Needs the
# bench classpath (gradle benchClasspathFile) and target/release. Prints per
# run the load average at its start, the rate, CPU per message and peak RSS.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 2 ] && [ -n "${BASE_ARGS:-}" ] || { sed -n '2,14p' "$0" >&2; exit 2; }
rounds=$1
shift
. "$ROOT/bench/rtt-lib.sh"
read -r -a jvm_opts <<<"${JVM_OPTS:--Xms256m -Xmx3072m}"
read -r -a base <<<"$BASE_ARGS"
rtt_header "bench/variants.sh $rounds $*"
echo "# common arguments: ${base[*]}; JVM options: ${jvm_opts[*]}"
run() { # NAME=EXTRA
	local name=${1%%=*} extra line load
	read -r -a extra <<<"${1#*=}"
	load=$(cut -d' ' -f1 /proc/loadavg)
	line=$(java "${jvm_opts[@]}" -cp "$CP" -Djava.library.path="$ROOT/target/release" \
		io.ibdxnet.bench.Workload "${base[@]}" "${extra[@]}" 2>/dev/null | grep '^RESULT ') || line="FAILED"
	printf '%-16s (load at start %6s) %s\n' "$name" "$load" \
		"$(echo "$line" | tr ' ' '\n' | grep -E '^(FAILED|nodes|seconds|msg_per_s|cpu_ns_per_msg|peak_rss_mb)' | paste -sd' ')"
}
variants=("$@")
for r in $(seq 1 "$rounds"); do
	echo "## round $r"
	if ((r % 2)); then
		for v in "${variants[@]}"; do run "$v"; done
	else
		for ((i = ${#variants[@]} - 1; i >= 0; i--)); do run "${variants[i]}"; done
	fi
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
