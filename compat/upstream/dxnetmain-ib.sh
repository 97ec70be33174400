#!/bin/bash
# Two upstream DXNetMain JVMs (unchanged) over our libibdxnet.so on an RDMA
# device of this host: node 1 receives, node 0 sends COUNT messages of SIZE
# bytes, then the pair is started again and node 0 sends COUNT requests
# (WORKLOADS, default "1 3"); the control plane on 127.0.0.1 / 127.0.0.2 (IBDXNET_COMPAT_LISTEN),
# both JVMs on the same device. Meant for the Soft-RoCE VM:
#
#   gradle upstreamClasspathFile cargoBuild
#   tools/rxe-vm/run-in-rxe-vm.sh -t 900 compat/upstream/dxnetmain-ib.sh [COUNT [SIZE [REQUESTS]]]
#
# Exit 0 when both print their results with every message counted, in every workload.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COUNT=${1:-2000}
SIZE=${2:-64}
REQUESTS=${3:-$COUNT} # upstream's requests are slow on emulated CPUs (4 per second in the VM)
PAIR_TIMEOUT=${PAIR_TIMEOUT:-420}
CP=$(cat "$ROOT/build/upstream-classpath.txt") || { echo "run: gradle upstreamClasspathFile" >&2; exit 2; }
work=$(mktemp -d)
mkdir "$work/jni"
cp "$ROOT/target/release/libibdxnet.so" "$work/jni/"
cp "$ROOT/compat/upstream/dxnetmain-ib.json" "$work/config.json"
cd "$work" || exit 2
# TCG's -cpu max advertises AVX levels it does not emulate faithfully, and C2's
# compilations cost more emulated time than they save (see tools/rxe-vm/java-in-vm.sh).
[ "${RXE_VM:-}" = 1 ] && export JAVA_TOOL_OPTIONS="-XX:UseAVX=0 -XX:TieredStopAtLevel=1"
J=(java -Xcheck:jni --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
	"-Dlog4j.configurationFile=file:$ROOT/compat/upstream/log4j2.xml" -cp "$CP" de.hhu.bsinfo.dxnet.DXNetMain config.json 5000)
export IBDXNET_FABRIC=verbs RUST_LOG=${RUST_LOG:-warn}

# One pair of JVMs running upstream's workload $1 (1: messages, 3: requests),
# each finding the other by address only; 0 when both report every message.
pair() {
	local w=$1 name=$2 n=$3 s r ok=0
	# Bounded, so that a stuck pair still shows its logs.
	IBDXNET_COMPAT_LISTEN=127.0.0.2 timeout "$PAIR_TIMEOUT" "${J[@]}" "$w" 0 "$n" "$SIZE" 1 1 > "receiver-$name.log" 2>&1 &
	local receiver=$!
	IBDXNET_COMPAT_LISTEN=127.0.0.1 timeout "$PAIR_TIMEOUT" "${J[@]}" "$w" "$n" 0 "$SIZE" 1 0 1 > "sender-$name.log" 2>&1
	s=$?
	wait $receiver
	r=$?
	for f in sender receiver; do
		echo "== $name: $f"
		grep -E "RESULTS|ERROR|WARN|Exception|WARNING in native|Progress|progress" "$f-$name.log" | grep -v "UnknownHostException: rxe-vm" | head -30
	done
	grep -q "RESULTS SEND: .*Msgs=$n," "sender-$name.log" || ok=1
	grep -q "RESULTS RECV: .*Msgs=$n," "receiver-$name.log" || ok=1
	grep -q "WARNING in native method" "sender-$name.log" "receiver-$name.log" && ok=1
	[ $s = 0 ] && [ $r = 0 ] || ok=1
	echo "$name: sender exit $s, receiver exit $r, results $([ $ok = 0 ] && echo complete || echo INCOMPLETE)"
	return $ok
}

# Messages, then the same two nodes started again with requests: each JVM
# discovers the other anew at the same addresses (WORKLOADS="1" for messages only).
rc=0
for w in ${WORKLOADS:-1 3}; do
	case $w in 1) name=messages n=$COUNT ;; 3) name=requests n=$REQUESTS ;; *) name=workload$w n=$COUNT ;; esac
	pair "$w" "$name" "$n" || rc=1
done
exit $rc
