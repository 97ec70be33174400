#!/bin/bash
# demo-pair.sh - our DXNet across two kernels: node 1's VM runs the demo's
# receiver, node 0's VM the sender (messages, then request round trips), over
# ib on rxe0 (fabric verbs: a fallback to sim would not cross the wire) or nio.
# Runs in every VM of a cluster:
#   gradle mainClasspathFile cargoBuild
#   RXE_VM_ACCEL="tcg,thread=single" tools/cluster-vm/cluster.sh -n 2 -t 600 \
#       -- tools/cluster-vm/demo-pair.sh [TRANSPORT [MESSAGES [REQUESTS]]]
# Exit 0 when the sender reports every message and request and the receiver quits
# after handling them. DEMO_FAULT="loss 5" (fault.sh arguments) applies on both NICs first.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
transport=${1:-ib} messages=${2:-20000} requests=${3:-200}
me=$CLUSTER_NODE out=$CLUSTER_OUT
read -r ip0 ip1 _ <<< "$CLUSTER_IPS"
port=22300
log() { echo "demo-pair[node$me] $(cut -d' ' -f1 /proc/uptime): $*"; }
[ "$CLUSTER_NODES" = 2 ] || { log "needs exactly 2 nodes"; exit 2; }
[ -z "${DEMO_FAULT:-}" ] || "$CLUSTER_TOOLS/fault.sh" $DEMO_FAULT || exit 1
# Single-threaded TCG: see tools/rxe-vm/java-in-vm.sh (AVX, C1 only).
export JAVA_TOOL_OPTIONS="-XX:UseAVX=0 -XX:TieredStopAtLevel=1"
demo=(java -Xcheck:jni -cp "$(cat "$ROOT/build/main-classpath.txt")" -Djava.library.path="$ROOT/target/release"
	io.ibdxnet.app.DemoMain --transport "$transport" --fabric verbs --messages "$messages" --requests "$requests"
	--threads 1 --timeout-ms 60000 --node0 "$ip0:$port" --node1 "$ip1:$port")
if [ "$me" = 1 ]; then
	touch "$out/receiver.starting"
	"${demo[@]}" --role receiver 2>&1 | tee "$out/receiver.log"
	rc=${PIPESTATUS[0]}
	grep -q "receiver: done" "$out/receiver.log" || rc=1
	log "receiver exit $rc"
	exit "$rc"
fi
# The sender once the receiver listens (its JVM starts in ~10 s of emulated time).
for _ in $(seq 600); do grep -qs "waiting for node 0" "$out/receiver.log" && break; sleep 0.5; done
"${demo[@]}" --role sender 2>&1 | tee "$out/sender.log"
rc=${PIPESTATUS[0]}
grep -q "^messages: $messages x" "$out/sender.log" && grep -q "^request/response: $requests round trips" "$out/sender.log" &&
	grep -q "^dropped messages: 0" "$out/sender.log" || rc=1
log "sender exit $rc"
exit "$rc"
