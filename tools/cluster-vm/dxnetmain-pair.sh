#!/bin/bash
# dxnetmain-pair.sh - upstream DXNet's unchanged DXNetMain across two kernels:
# node 0's VM sends COUNT messages of 64 B to node 1's VM over our
# libibdxnet.so on rxe0 (upstream's ib device, fabric verbs). Runs in every VM:
#   gradle upstreamClasspathFile cargoBuild
#   RXE_VM_ACCEL="tcg,thread=single" RXE_VM_MEM=2G tools/cluster-vm/cluster.sh -n 2 -t 900 \
#       -- tools/cluster-vm/dxnetmain-pair.sh [COUNT [WORKLOAD]]     (WORKLOAD 1: messages, 3: requests)
# Node 1 starts once node 0 (upstream's login coordinator) waits for it, as in
# compat/upstream/dxnetmain-ib.sh. Exit 0 when this node printed its result with every message.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
count=${1:-1000} workload=${2:-1}
me=$CLUSTER_NODE out=$CLUSTER_OUT
read -r ip0 ip1 _ <<< "$CLUSTER_IPS"
work=$(mktemp -d)
mkdir "$work/jni"
cp "$ROOT/target/release/libibdxnet.so" "$work/jni/"
# upstream's configuration of the VM pair, with this cluster's addresses
sed -e "s/\"127.0.0.1\"/\"$ip0\"/" -e "s/\"127.0.0.2\"/\"$ip1\"/" "$ROOT/compat/upstream/dxnetmain-ib.json" > "$work/config.json"
cd "$work" || exit 2
export JAVA_TOOL_OPTIONS="-XX:UseAVX=0 -XX:TieredStopAtLevel=1" IBDXNET_FABRIC=verbs IBDXNET_COMPAT_LISTEN=$RXE_IP RUST_LOG=${RUST_LOG:-warn}
J=(java -Xcheck:jni --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
	"-Dlog4j.configurationFile=file:$ROOT/compat/upstream/log4j2.xml" -cp "$(cat "$ROOT/build/upstream-classpath.txt")"
	de.hhu.bsinfo.dxnet.DXNetMain config.json 5000 "$workload")
if [ "$me" = 0 ]; then
	"${J[@]}" "$count" 0 64 1 0 1 2>&1 | tee "$out/node0.log"
	rc=${PIPESTATUS[0]}
	grep -q "RESULTS SEND: .*Msgs=$count," "$out/node0.log" || rc=1
else
	for _ in $(seq 1200); do grep -qs "waiting for 1 nodes" "$out/node0.log" && break; sleep 0.5; done
	"${J[@]}" 0 "$count" 64 1 1 2>&1 | tee "$out/node1.log"
	rc=${PIPESTATUS[0]}
	grep -q "RESULTS RECV: .*Msgs=$count," "$out/node1.log" || rc=1
fi
grep -h "ReqRespTimeouts" "$out/node$me.log" | tail -1
echo "dxnetmain-pair[node$me]: exit $rc"
exit "$rc"
