#!/usr/bin/env bash
# Where a round trip's hand-offs go (issue 31, item 1): RTT p50/p99 and CPU
# per round trip of 64 B requests between two ib nodes on sim in one JVM,
# with each hand-off removed in turn, interleaved over ROUNDS rounds; then
# Aeron's ping-pong over UDP and IPC on the same machine in the same run.
#
#   bench/rtt-hops.sh [ROUNDS] > bench/results/DATE-rtt-hops.txt
#
# Per side, a round trip's thread crossings in each row:
#   send thread, pool:   caller -> send thread -> (wire) -> receive thread -> handler -> send thread
#   caller posts, pool:  caller -> (wire) -> receive thread -> handler -> (wire)
#   send thread, inline: caller -> send thread -> (wire) -> receive thread (handler) -> send thread
#   caller posts, inline: caller -> (wire) -> receive thread (handler) -> (wire)
# Then, per row, where one run's round trips spend their time (RttTrace:
# nanoTime stamps at eight points on the threads that pass them).
# Needs the bench classpath (gradle benchClasspathFile) and target/release.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-3}
messages=${RTT_MESSAGES:-20000}
. "$ROOT/bench/rtt-lib.sh"
rtt_header "bench/rtt-hops.sh $rounds ($messages round trips per run)"
row() { rtt_row 28 "$@"; }
ib=(io.ibdxnet.bench.Workload --transport ib --pattern rtt --nodes 2 --size 64 --messages "$messages" --threads 1 --handlers 1)
for r in $(seq 1 "$rounds"); do
	echo "## round $r (load $(cut -d' ' -f1 /proc/loadavg))"
	row "send thread, pool" "${ib[@]}" --native send_from_caller=false --handleOnReceivingThread false
	row "caller posts, pool" "${ib[@]}" --native send_from_caller=true --handleOnReceivingThread false
	row "send thread, inline" "${ib[@]}" --native send_from_caller=false --handleOnReceivingThread true
	row "caller posts, inline" "${ib[@]}" --native send_from_caller=true --handleOnReceivingThread true
	row "caller posts, inline, shared" "${ib[@]}" --native send_from_caller=true --native engine_threads=shared --handleOnReceivingThread true
	row "aeron udp" --add-exports java.base/jdk.internal.misc=ALL-UNNAMED io.ibdxnet.bench.AeronPingPong --channel udp --messages "$messages"
	row "aeron ipc" --add-exports java.base/jdk.internal.misc=ALL-UNNAMED io.ibdxnet.bench.AeronPingPong --channel ipc --messages "$messages"
done
trace() { # NAME ARGS...
	local name=$1
	shift
	echo "## trace: $name (load $(cut -d' ' -f1 /proc/loadavg))"
	"${jvm[@]}" io.ibdxnet.bench.RttTrace --messages "$messages" "$@" 2>/dev/null | grep -v '^#' || echo FAILED
}
trace "send thread, pool" --native send_from_caller=false --handleOnReceivingThread false
trace "caller posts, pool" --native send_from_caller=true --handleOnReceivingThread false
trace "send thread, inline" --native send_from_caller=false --handleOnReceivingThread true
trace "caller posts, inline" --native send_from_caller=true --handleOnReceivingThread true
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
