#!/usr/bin/env bash
# Where the cost of many nodes in one JVM comes from (issue 31, item 3): the
# nodes that exist, the nodes that stream at once, or the destinations each
# sender writes to (the connections' state a message touches). All to all,
# 64 B, ib on sim, 1 sender and 1 handler per node, the same TOTAL (25.6 M) messages
# per run: 2 nodes; 64 nodes of which the first 2, 8 or all 64 send, each to
# the 1 node after it (Workload --active, --fanout); 64 nodes each sending to
# the 8 and the 63 nodes after it. Interleaved rounds, the order reversed
# every other round; after each run the engines' counters over it (posts,
# receives, iterations, sleeps). Usage: bench/fanout.sh [ROUNDS] (default 2);
# needs the bench classpath (gradle benchClasspathFile) and target/release.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-2}
. "$ROOT/bench/rtt-lib.sh"
jvm=(java -Xms256m -Xmx3072m -cp "$CP" -Djava.library.path="$ROOT/target/release")
rtt_header "bench/fanout.sh $rounds"
total=${TOTAL:-25600000}
row() { # NODES ACTIVE FANOUT
	local nodes=$1 active=$2 fanout=$3 out
	out=$("${jvm[@]}" io.ibdxnet.bench.Workload --transport ib --pattern all --nodes "$nodes" --active "$active" \
		--fanout "$fanout" --size 64 --threads 1 --handlers 1 --messages $((total / active)) 2>&1) || true
	printf '%-36s %s\n' "nodes $nodes active $active fanout $fanout" \
		"$(echo "$out" | grep '^RESULT ' | tr ' ' '\n' | grep -E '^(seconds|msg_per_s|cpu_ns_per_msg|peak_rss_mb)=' | paste -sd' ' || echo FAILED)"
	echo "$out" | grep '^engine counters' | sed 's/^/    /' || true
}
cases=("2 2 1" "64 2 1" "64 8 1" "64 64 1" "64 64 8" "64 64 63")
for r in $(seq 1 "$rounds"); do
	echo "## round $r (load $(cut -d' ' -f1 /proc/loadavg))"
	if ((r % 2)); then order=("${cases[@]}"); else order=(); for ((i = ${#cases[@]} - 1; i >= 0; i--)); do order+=("${cases[i]}"); done; fi
	for c in "${order[@]}"; do
		# shellcheck disable=SC2086 # three words: nodes, active senders, fanout
		row $c
	done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
