#!/usr/bin/env bash
# Round trips with the waiting requester receiving its response itself
# (native key recv_from_caller) and without: 64 B requests between two ib
# nodes on sim in one JVM (Workload --pattern rtt), back to back (100 000
# round trips) and after a 2 ms pause each (2 000; the receive threads fall
# asleep in the pause), handlers on the pool and on the receiving thread.
# Interleaved rounds, the order of the two settings reversed every other
# round. Usage: bench/rtt-waiting.sh [ROUNDS] (default 3); needs the bench
# classpath (gradle benchClasspathFile) and target/release.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-3}
. "$ROOT/bench/rtt-lib.sh"
rtt_header "bench/rtt-waiting.sh $rounds"
row() { # NAME WORKLOAD_ARGS...
	local name=$1
	shift
	rtt_row 44 "$name" io.ibdxnet.bench.Workload --transport ib --pattern rtt --nodes 2 --size 64 --threads 1 \
		--handlers 1 "$@"
}
for r in $(seq 1 "$rounds"); do
	echo "## round $r (load $(cut -d' ' -f1 /proc/loadavg))"
	if ((r % 2)); then order=(true false); else order=(false true); fi
	for inline in true false; do
		for rfc in "${order[@]}"; do
			row "back to back, inline $inline, receives $rfc" --messages 100000 --handleOnReceivingThread "$inline" \
				--native recv_from_caller="$rfc"
			row "2 ms pauses, inline $inline, receives $rfc" --messages 2000 --gap-us 2000 \
				--handleOnReceivingThread "$inline" --native recv_from_caller="$rfc"
		done
	done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
